// Starting and stopping the NPU from C++ programs that use libtorch_npu
// without Python (torch_npu's C++ API, csrc/libs/init_npu.h).
#pragma once

#include <string>

#include <c10/core/Device.h>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace torch_npu {

// Makes the device current and initialises it (its streams and memory);
// raises for an index that is not a device, a string that names no npu
// device ("npu:1"), or a device of another type.
TORCH_NPU_API void init_npu(const c10::DeviceIndex device_index = 0);
TORCH_NPU_API void init_npu(const std::string& device_str);
TORCH_NPU_API void init_npu(const at::Device& device);

// Waits for every device's queued work and returns cached device memory;
// the devices stay usable.
TORCH_NPU_API void finalize_npu();

}  // namespace torch_npu

namespace torch {
namespace npu {

// Waits for the device's queued work (-1: the current device).
TORCH_NPU_API void synchronize(int64_t device_index = -1);

}  // namespace npu
}  // namespace torch

namespace c10 {
namespace npu {

C10_NPU_API DeviceIndex current_device();

}  // namespace npu
}  // namespace c10
