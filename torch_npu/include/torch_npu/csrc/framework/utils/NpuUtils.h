// Real torch_npu's framework headers (NpuUtils.h, CalcuOpUtil.h) put
// std::string and std::vector into the global namespace, and operator code
// written against them (op-plugin, MindSpeed) says `string` and `vector`
// unqualified. OpPreparation.h includes this header to keep that working.
#pragma once

#include <string>
#include <vector>

using std::string;
using std::vector;
