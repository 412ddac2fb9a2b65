// vNPU: the parameters of ATB's training operations. vNPU has none of them
// yet; code that names one fails to compile, naming it.
#pragma once

namespace atb {
namespace train {}  // namespace train
}  // namespace atb
