// vNPU: the parameters of ATB's inference operations that vNPU has.
#pragma once

#include "acl/acl_base.h"

namespace atb {
namespace infer {

// out = op(x) @ op(weight) [+ bias] [+ accum]: inputs x, weight, then bias
// (hasBias) and accum (enAccum, the output's buffer, added in place; how
// MindSpeed fuses gradient accumulation). op transposes when transposeA /
// transposeB. Computed in float32; out in outDataType (UNDEFINED: x's
// dtype, or accum's with enAccum).
struct LinearParam {
  bool transposeA = false;
  bool transposeB = true;
  bool hasBias = true;
  aclDataType outDataType = ACL_DT_UNDEFINED;
  bool enAccum = false;
};

}  // namespace infer
}  // namespace atb
