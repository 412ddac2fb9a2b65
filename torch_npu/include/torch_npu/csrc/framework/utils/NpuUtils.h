// Real torch_npu's framework headers (NpuUtils.h, CalcuOpUtil.h) put
// std::string and std::vector into the global namespace, and operator code
// written against them (op-plugin, MindSpeed) says `string` and `vector`
// unqualified. OpPreparation.h includes this header to keep that working.
#pragma once

#include <string>
#include <vector>

using std::string;
using std::vector;

namespace at_npu {
namespace native {

// Inline capacity of torch_npu's small vectors of operator inputs/outputs.
const int N = 32;

// Whether a host-memory operator input's values are known when CANN compiles
// the operator (its shape depends on them) or only when it runs.
typedef enum CompileType {
  MEMORY_HOST_COMPILE_DEPENDENT = 1,
  MEMORY_HOST_COMPILE_INDEPENDENT = 2,
} CompileType;

}  // namespace native
}  // namespace at_npu
