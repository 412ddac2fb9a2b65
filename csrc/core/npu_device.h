// The virtual NPU devices as the adaptor sees them: count, current device,
// and access to the runtime's Device objects with torch-style errors.
//
// The current device is per thread (like torch.cuda), default 0.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <utility>

namespace vnpu {
class Device;  // <vnpu/runtime.h>, for the files that use one
}  // namespace vnpu

namespace torch_npu {

// Upper bound on devices the adaptor tracks per thread.
constexpr int kMaxDevices = 64;

// Number of visible virtual NPUs; 0 when the environment is invalid.
// Never throws (libraries call it to probe for an NPU).
c10::DeviceIndex device_count() noexcept;

// Why device_count() is 0 when the environment is invalid; "" otherwise.
std::string device_init_error() noexcept;

// Throws torch_npu's fork error in a forked child of a process that had
// initialised the device.
void check_not_forked();
bool is_in_bad_fork() noexcept;

// Throws a torch error naming the valid range unless 0 <= index < count.
void check_device_index(c10::DeviceIndex index);

// The runtime device; throws a torch error for a bad index.
vnpu::Device& runtime_device(c10::DeviceIndex index);

c10::DeviceIndex current_device();
// A device index from Python: -1 means the current device. Checked against
// the device count *before* it is narrowed to c10::DeviceIndex (8 bits), so
// 256 is an invalid device, never device 0.
c10::DeviceIndex resolve_device_index(int64_t device);
// Same, but -1 is not accepted.
c10::DeviceIndex checked_device_index(int64_t device);
// -1 when the device was never touched on this thread (error suffixes).
c10::DeviceIndex current_device_or_minus_one() noexcept;
void set_current_device(c10::DeviceIndex index);

// True once any device was used in this process (torch.npu.is_initialized).
bool is_initialized() noexcept;
void mark_initialized() noexcept;

// What torch.npu.get_device_properties reports (from the chip profile).
struct DeviceProperties {
  std::string name;
  int soc_version = 0;
  uint64_t total_memory = 0;
  int cube_core_num = 0;
  int vector_core_num = 0;
  uint64_t l2_cache_size = 0;
  int major = 0;
  int minor = 0;
  bool supports_bf16 = false;
  int physical_id = 0;  // id before ASCEND_RT_VISIBLE_DEVICES
};
DeviceProperties device_properties(c10::DeviceIndex index);

// (free, total) bytes of the device's memory.
std::pair<uint64_t, uint64_t> device_memory_info(c10::DeviceIndex index);
// torch.npu.utilization: percent of the time since the previous call for
// this device (the first: since the device started) during which any of its
// streams ran work.
int device_utilization(c10::DeviceIndex index);

// True once a stream of the device was created (work was launched on it).
bool device_was_used(c10::DeviceIndex index);
// Nanoseconds the device had any stream busy since it was created (the
// cumulative clock behind device_utilization, which this does not reset).
int64_t device_busy_ns(c10::DeviceIndex index);

inline c10::Device npu_device(c10::DeviceIndex index) {
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

}  // namespace torch_npu
