// Pinned host memory for npu (tensor.pin_memory(), non_blocking copies).
//
// The virtual device reads host RAM directly, so "pinned" memory is ordinary
// aligned host memory that the allocator remembers, which lets
// Tensor.is_pinned() answer truthfully and lets copies from it run
// asynchronously on a stream.
#pragma once

#include <c10/core/Allocator.h>

namespace torch_npu {

c10::Allocator* pinned_host_allocator();
bool is_pinned_host_pointer(const void* ptr);

}  // namespace torch_npu
