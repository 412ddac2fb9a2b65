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

// torch.npu.set_sync_debug_mode's levels: what an operation that makes the
// host wait for the device (.item(), a copy to the host) does.
enum class SyncDebugMode { L_DISABLED = 0, L_WARN, L_ERROR };

// The process's sync debug mode (one for the process, shared with
// torch.npu.set_sync_debug_mode / get_sync_debug_mode).
class C10_NPU_API WarningState {
 public:
  void set_sync_debug_mode(SyncDebugMode level);
  SyncDebugMode get_sync_debug_mode();
};

C10_NPU_API WarningState& warning_state();

// Called at a synchronising operation: warns or raises as the mode says
// ("called a synchronizing NPU operation"), does nothing when disabled.
C10_NPU_API void warn_or_error_on_sync();

}  // namespace c10_npu
