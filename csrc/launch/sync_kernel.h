// The synchronous native path: ATen CPU kernels run on the caller, directly
// on device memory, after the device's current stream drained.
//
// Used for ops whose output shape depends on the data (nonzero, unique,
// masked_select, boolean indexing), ops returning host values, and every op
// with a CPU kernel that has no asynchronous npu kernel yet. Nothing is
// copied: inputs become CPU aliases of their device buffers, and while the
// CPU kernel runs, the CPU allocator hands out device memory of that device
// (DeviceMemoryScope, cpu_allocation_scope.h), so fresh outputs are born on the device.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <map>
#include <string>
#include <vector>

namespace torch_npu {

// Boxed kernel for any aten op with a CPU kernel.
void sync_native_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack);

// Registers sync_native_kernel for PrivateUse1 on every aten op that has a
// CPU kernel and no npu kernel yet (views and ops in `excluded` aside).
// Returns the registered schema names.
std::vector<std::string> register_sync_native_kernels(const std::vector<std::string>& excluded);

// Times each op took the synchronous native path in this process.
std::map<std::string, int64_t> sync_native_counts();
void reset_sync_native_counts();

}  // namespace torch_npu
