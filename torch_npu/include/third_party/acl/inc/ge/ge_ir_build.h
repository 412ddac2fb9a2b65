/* vNPU: the graph engine's IR build API (ge/ge_ir_build.h). Not supported on
 * vNPU: see graph/vnpu_not_supported.h. */
#ifndef VNPU_GE_GE_IR_BUILD_H
#define VNPU_GE_GE_IR_BUILD_H
#include <vector>
#include "graph/ge_error_codes.h"
#include "graph/graph.h"
#include "graph/vnpu_not_supported.h"

namespace ge {
graphStatus aclgrphGenerateForOp(const AscendString& op_type, const std::vector<TensorDesc>& inputs,
                                 const std::vector<TensorDesc>& outputs, Graph& graph)
    VNPU_GE_NOT_SUPPORTED("ge::aclgrphGenerateForOp");
}  // namespace ge
#endif
