// Unsafe device data after a device fault: real torch_npu's tensor check for
// fault recovery (torch_npu.npu._recovery, torch.npu.restart_device).
//
// After an uncorrectable memory error or a device restart, the data of the
// tensors alive at that moment cannot be trusted. restart_device marks every
// allocated block of the device unsafe; while the check is on, an operator
// given a tensor whose storage is unsafe raises "There is unsafe data in the
// input tensor."; a copy into such a tensor (from safe data) makes it safe
// again, and a block freed and handed out again is safe. MindSpeed's
// checkpoint-free recovery rebuilds its tensors this way.
//
// Cost when unused: one relaxed atomic load per tensor argument of a launch.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>

namespace torch_npu {

namespace detail {
// True while the check is on and some block is unsafe.
extern std::atomic<bool> g_unsafe_data_checked;
}  // namespace detail

inline bool unsafe_data_checked() { return detail::g_unsafe_data_checked.load(std::memory_order_relaxed); }

// The check's switch (torch_npu's set/get_npu_tensor_unsafe_check_flag).
void set_unsafe_data_check(bool on);
bool unsafe_data_check();

// Marks every allocated block of `device` unsafe.
void mark_all_device_data_unsafe(c10::DeviceIndex device);

// Whether the storage starting at `storage_data` is safe; marks it safe.
bool is_device_data_safe(const void* storage_data);
void mark_device_data_safe(const void* storage_data);

// A block went back to its allocator: its next tensor is safe.
void forget_device_data(const void* block);

// Raises real torch_npu's error when `tensor` (an npu tensor) is unsafe;
// call only when unsafe_data_checked().
void check_npu_tensor_is_safe(const at::Tensor& tensor);

}  // namespace torch_npu
