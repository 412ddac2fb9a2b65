// The default npu random generators, as torch_npu's C++ API hands them out.
// vNPU's generator draws on the host (a Philox-like counter per device);
// extensions use it through at::Generator (seed, state, its mutex).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace at_npu {
namespace detail {

// The default generator of `device_index` (-1: the current device).
TORCH_NPU_API const at::Generator& getDefaultNPUGenerator(c10::DeviceIndex device_index = -1);
// A new generator on `device_index` (-1: the current device).
TORCH_NPU_API at::Generator createNPUGenerator(c10::DeviceIndex device_index = -1);

}  // namespace detail
}  // namespace at_npu
