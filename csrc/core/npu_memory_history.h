// The caching allocators' event stream, as torch's CUDA allocator keeps it:
// the memory history behind torch.npu.memory._record_memory_history /
// _snapshot / _dump_snapshot (the trace the memory visualiser reads), and
// the C++ observers of c10_npu::NPUCachingAllocator::attachAllocatorTraceTracker.
//
// The runtime's allocators report blocks and segments through one hook
// (vnpu::set_block_trace_hook); this file owns it and installs it while
// anyone listens: the history, an attached tracker, or the stream sanitizer
// (npu_trace.h), whose events it forwards.
//
// Stacks: with a context recorded, the Python (and optionally C++) stack of
// each allocation (and free, for context "all") is kept. Gathering a stack
// may take the GIL, so it is gathered before the allocator's mutex is taken
// (ContextScope, on the allocating thread) and picked up by the hook on the
// same thread; work that allocates on a stream worker records no stack.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <vnpu/allocator_stats.h>

namespace torch {
struct CapturedTraceback;
}

namespace torch_npu {

// TraceEntry's actions (NPUCachingAllocator.h), in its order.
enum class MemoryAction : int { kAlloc, kFreeRequested, kFreeCompleted, kSegmentAlloc, kSegmentFree };

// What stacks are kept: none, those of live allocations, also those of the
// trace's allocations, also those of its frees.
enum class RecordContext : int { kNever = 0, kState = 1, kAlloc = 2, kAll = 3 };

struct MemoryEvent {
  MemoryAction action;
  int device;
  std::uintptr_t address;
  std::size_t size;
  void* stream;  // the aclrtStream: the runtime stream's address (only for comparing)
  int stream_index;
  int64_t time_us;
  std::shared_ptr<torch::CapturedTraceback> context;  // may be null
  vnpu::PoolId pool{0, 0};                               // the private pool's id (torch.npu.MemPool.id), {0, 0}: none
};

// torch.npu.memory._record_memory_history. `enabled`: anything recorded;
// `trace`: the event trace too ("all"), not only live allocations' stacks
// ("state"). `max_entries` bounds each device's trace (oldest go first).
void record_memory_history(bool enabled, bool trace, RecordContext context, bool cpp_stacks, size_t max_entries,
                           bool clear);
bool memory_history_enabled();

// A device's trace, oldest first.
std::vector<MemoryEvent> memory_trace(int device);
// The stack of the live allocation at `address` (null when none was kept).
std::shared_ptr<torch::CapturedTraceback> allocation_context(std::uintptr_t address);

// Called with every event from then on (under the allocator's mutex, on the
// thread that allocates or frees: it must be quick and must not allocate).
// Listeners stay for the life of the process, as in torch_npu.
void add_memory_event_listener(std::function<void(const MemoryEvent&)> listener);

// Installs or removes the allocators' hook after a consumer changed.
void refresh_block_hook();

// Around one allocation (RecordContext::kState) or free (kAll) on the
// calling thread: gathers the stack first when the history wants it.
class ContextScope {
 public:
  explicit ContextScope(RecordContext needed);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  bool gathered_ = false;  // with the history off (the usual case) there is nothing to drop
};

}  // namespace torch_npu
