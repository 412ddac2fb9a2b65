// Pinned host memory for npu (tensor.pin_memory(), non_blocking copies):
// torch's caching host allocator (ATen/core/CachingHostAllocator.h, the one
// behind torch.cuda's pinned memory) with vNPU's runtime underneath.
//
// The virtual device reads host RAM directly, so "pinned" memory is ordinary
// 512-byte aligned host memory. What the caching adds is real torch_npu's
// (and CUDA's) behaviour: requests round up to a power of two (up to
// pinned_max_round_threshold_mb), freed blocks are cached for reuse (up to
// pinned_max_cached_size_mb; larger ones go back at once), host_empty_cache
// returns the cached ones, and host_memory_stats counts all of it.
//
// A block that a queued copy still uses is not reused when its tensor dies:
// the copy records its stream (record_pinned_use), the free records the
// stream's position, and the block becomes free once the stream has passed
// it. So a queued copy never owns (and never destroys) the Python-visible
// tensor: stream workers must not run Python object destructors (Note [Host
// waits and the GIL] in npu_gil.cpp).
//
// Thread-safety: all functions may be called from any thread.
#pragma once

#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

namespace torch_npu {

c10::Allocator* pinned_host_allocator();
at::HostAllocator* pinned_host_caching_allocator();
bool is_pinned_host_pointer(const void* ptr);

// The pinned block holding `ptr` is used by the tasks enqueued on `stream`
// so far: once its tensor dies, it is reused only after the stream has
// completed them.
void record_pinned_use(const void* ptr, const c10::Stream& stream);

}  // namespace torch_npu
