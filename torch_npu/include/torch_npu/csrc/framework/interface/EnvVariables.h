// at_npu::native::env: torch_npu's switches for how operators compile, as
// extensions query them. vNPU never compiles CANN operators: jit
// compilation is always off.
#pragma once

namespace at_npu {
namespace native {
namespace env {

inline bool CheckJitDisable() { return true; }

}  // namespace env
}  // namespace native
}  // namespace at_npu
