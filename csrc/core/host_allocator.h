// Pinned host memory for npu (tensor.pin_memory(), non_blocking copies).
//
// The virtual device reads host RAM directly, so "pinned" memory is ordinary
// aligned host memory that the allocator remembers, which lets
// Tensor.is_pinned() answer truthfully and lets copies from it run
// asynchronously on a stream.
//
// Like CUDA's caching host allocator, a block that a queued copy still uses
// is not released when its tensor dies: the copy records its use
// (record_pinned_use), and the block is freed only once every recorded
// stream has passed that point. So a queued copy never owns (and never
// destroys) the Python-visible tensor: stream workers must not run Python
// object destructors (Note [Host waits and the GIL] in npu_gil.cpp).
//
// Thread-safety: all functions may be called from any thread.
#pragma once

#include <c10/core/Allocator.h>

namespace vnpu {
class Stream;
}

namespace torch_npu {

c10::Allocator* pinned_host_allocator();
bool is_pinned_host_pointer(const void* ptr);

// The pinned block holding `ptr` is used by the tasks enqueued on `stream`
// so far: it stays allocated until the stream has completed them.
void record_pinned_use(const void* ptr, vnpu::Stream& stream);

// Pinned blocks whose tensors died while copies still used them (tests).
size_t deferred_pinned_blocks();

}  // namespace torch_npu
