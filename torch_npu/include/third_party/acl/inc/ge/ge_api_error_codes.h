/* vNPU: the graph engine's Status type (ge/ge_api_error_codes.h).
 * See graph/vnpu_not_supported.h. */
#ifndef VNPU_GE_GE_API_ERROR_CODES_H
#define VNPU_GE_GE_API_ERROR_CODES_H
#include <cstdint>
#include "ge/ge_error_codes.h"
#include "graph/ge_error_codes.h"

namespace ge {
using Status = uint32_t;
constexpr Status SUCCESS = 0U;
constexpr Status FAILED = 0xFFFFFFFFU;
constexpr Status PARAM_INVALID = ACL_ERROR_GE_PARAM_INVALID;
}  // namespace ge
#endif
