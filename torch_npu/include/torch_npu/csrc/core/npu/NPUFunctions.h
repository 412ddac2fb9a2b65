// Device functions of torch_npu's C++ API (c10_npu::device_count, ...).
#pragma once

#include <cstdint>

#include <c10/core/Device.h>

#include "third_party/acl/inc/acl/acl_rt.h"
#include "torch_npu/csrc/core/npu/NPUMacros.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

namespace c10_npu {

C10_NPU_API c10::DeviceIndex device_count() noexcept;
// Raises when there is no device.
C10_NPU_API c10::DeviceIndex device_count_ensure_non_zero();
C10_NPU_API c10::DeviceIndex current_device();
C10_NPU_API void set_device(c10::DeviceIndex device);
// Waits for every stream of the current device.
C10_NPU_API void device_synchronize();
// Makes `device` current and returns the previous device.
C10_NPU_API int ExchangeDevice(int device);
C10_NPU_API int MaybeExchangeDevice(int to_device);
C10_NPU_API aclError GetDevice(int32_t* device);
C10_NPU_API aclError SetDevice(c10::DeviceIndex device);
C10_NPU_API aclError MaybeSetDevice(c10::DeviceIndex device);
C10_NPU_API void stream_synchronize(aclrtStream stream);

}  // namespace c10_npu
