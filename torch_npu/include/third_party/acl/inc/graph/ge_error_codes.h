/* vNPU: the graph library's status type and codes (graph/ge_error_codes.h).
 * See vnpu_not_supported.h: no function here needs the engine. */
#ifndef VNPU_GRAPH_GE_ERROR_CODES_H
#define VNPU_GRAPH_GE_ERROR_CODES_H
#include <cstdint>

#if defined(__GNUC__)
#define GE_FUNC_VISIBILITY __attribute__((visibility("default")))
#else
#define GE_FUNC_VISIBILITY
#endif

namespace ge {
using graphStatus = uint32_t;
constexpr graphStatus GRAPH_SUCCESS = 0U;
constexpr graphStatus GRAPH_FAILED = 0xFFFFFFFFU;
constexpr graphStatus GRAPH_NOT_CHANGED = 1343242304U;
constexpr graphStatus GRAPH_PARAM_INVALID = 50331649U;
constexpr graphStatus GRAPH_NODE_WITHOUT_CONST_INPUT = 50331648U;
constexpr graphStatus GRAPH_NODE_NEED_REPASS = 50331647U;
constexpr graphStatus GRAPH_INVALID_IR_DEF = 50331646U;
constexpr graphStatus OP_WITHOUT_IR_DATATYPE_INFER_RULE = 50331645U;
}  // namespace ge
#endif
