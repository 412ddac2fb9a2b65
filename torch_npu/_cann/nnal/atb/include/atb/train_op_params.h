// vNPU: the parameters of ATB's training operations that vNPU has.
#pragma once

#include <cstdint>

namespace atb {
namespace train {

// The gradients of infer::RmsNormParam's NORM: inputs dy, x, rstd (the
// forward's float32 output), gamma; outputs dx (x's dtype) and dgamma
// (float32, gamma's shape). Computed in float32.
struct RmsNormBackwardParam {
  uint8_t rsv[8] = {0};
};

}  // namespace train
}  // namespace atb
