// c10_npu::NPUCachingAllocator: torch_npu's caching allocator as extensions
// call it. The functions act on vNPU's caching allocator, the one torch.npu
// memory statistics report; raw_alloc'd memory is counted there too and must
// be returned with raw_delete.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include "third_party/acl/inc/acl/acl_rt.h"
#include "torch_npu/csrc/core/npu/NPUMacros.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

namespace c10_npu {
namespace NPUCachingAllocator {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

// The allocator torch uses for npu tensors.
C10_NPU_API c10::Allocator* get();
// `nbytes` on the current device, for use on its current stream (or `stream`).
C10_NPU_API void* raw_alloc(size_t nbytes);
C10_NPU_API void* raw_alloc_with_stream(size_t nbytes, aclrtStream stream);
// Frees what raw_alloc returned; raises for any other pointer.
C10_NPU_API void raw_delete(void* ptr);
// Returns every cached, unused block to device memory.
C10_NPU_API void emptyCache(bool check_error = true);
C10_NPU_API DeviceStats getDeviceStats(c10::DeviceIndex device);
C10_NPU_API void resetPeakStats(c10::DeviceIndex device);
C10_NPU_API void resetAccumulatedStats(c10::DeviceIndex device);
// Keeps the block of `ptr` from reuse until the work queued on `stream` so far has run.
C10_NPU_API void recordStream(const c10::DataPtr& ptr, NPUStream stream);
C10_NPU_API void setMemoryFraction(double fraction, int device);
C10_NPU_API double getMemoryFraction(int device);

// One allocator event, as torch_npu reports it to trace trackers and keeps
// it in the memory history (torch.npu.memory._record_memory_history).
// vNPU reports ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC and
// SEGMENT_FREE; the others (expandable segments' maps, snapshots, OOM) are
// never sent.
struct TraceEntry {
  enum Action {
    ALLOC,           // a block handed out
    FREE_REQUESTED,  // its owner freed it
    FREE_COMPLETED,  // back in the cache (after record_stream users passed)
    SEGMENT_ALLOC,   // a segment taken from device memory
    SEGMENT_FREE,    // a segment given back (empty_cache, out-of-memory retries)
    SEGMENT_MAP,
    SEGMENT_UNMAP,
    SNAPSHOT,
    OOM,
    WORKSPACE_SNAPSHOT
  };
  TraceEntry(Action action, int device, int64_t addr, size_t size, aclrtStream stream,
             c10::MempoolId_t mempool = {0, 0}, std::shared_ptr<c10::GatheredContext> context = nullptr)
      : action_(action),
        device_(device),
        addr_(addr),
        context_(std::move(context)),
        stream_(stream),
        size_(static_cast<int64_t>(size)),
        mempool_(std::move(mempool)) {}
  Action action_;
  int device_;
  int64_t addr_;
  std::shared_ptr<c10::GatheredContext> context_;  // the stack, when the memory history keeps one
  aclrtStream stream_;
  int64_t size_;
  c10::MempoolId_t mempool_;
};

enum struct RecordContext {
  NEVER = 0,
  STATE = 1,  // stacks of live allocations
  ALLOC = 2,  // also of the trace's allocations
  ALL = 3,    // also of its frees
};

// Called with every event from then on, on the thread that allocates or
// frees (stream workers included) with the allocator's lock held: be quick,
// do not allocate npu memory. Trackers stay attached for the process's life.
using AllocatorTraceTracker = std::function<void(const TraceEntry&)>;
C10_NPU_API void attachAllocatorTraceTracker(AllocatorTraceTracker tracker);
// Whether torch.npu.memory._record_memory_history is recording.
C10_NPU_API bool isHistoryEnabled();

}  // namespace NPUCachingAllocator
}  // namespace c10_npu
