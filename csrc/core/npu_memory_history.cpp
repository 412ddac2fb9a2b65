#include "csrc/core/npu_memory_history.h"

#include <c10/util/Exception.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <unordered_map>

#include <vnpu/caching_allocator.h>
#include <vnpu/stream.h>

#include "csrc/core/npu_trace.h"

namespace torch_npu {
namespace {

struct History {
  std::mutex mutex;
  bool enabled = false;  // guarded by mutex; also in g_history_on
  bool trace = false;
  RecordContext context = RecordContext::kNever;
  bool cpp_stacks = false;
  size_t max_entries = 0;
  std::unordered_map<int, std::deque<MemoryEvent>> traces;                                    // by device
  std::unordered_map<std::uintptr_t, std::shared_ptr<torch::CapturedTraceback>> live_contexts;  // by address
};

History& history() {
  static History* h = new History();  // leaked: allocators free blocks during static destruction
  return *h;
}

std::atomic<bool> g_history_on{false};
std::atomic<int> g_context{0};  // RecordContext while on, for ContextScope without the mutex
std::atomic<bool> g_cpp_stacks{false};

// Append-only: listeners are never removed, so readers need no lock.
constexpr size_t kMaxListeners = 64;
std::array<std::function<void(const MemoryEvent&)>*, kMaxListeners> g_listeners{};
std::atomic<size_t> g_listener_count{0};
std::mutex g_listener_mutex;  // serialises additions

thread_local std::shared_ptr<torch::CapturedTraceback> t_pending_context;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

MemoryAction action_of(vnpu::BlockTraceEvent event) {
  switch (event) {
    case vnpu::BlockTraceEvent::kHandedOut: return MemoryAction::kAlloc;
    case vnpu::BlockTraceEvent::kFreeRequested: return MemoryAction::kFreeRequested;
    case vnpu::BlockTraceEvent::kReturned: return MemoryAction::kFreeCompleted;
    case vnpu::BlockTraceEvent::kSegmentReserved: return MemoryAction::kSegmentAlloc;
    case vnpu::BlockTraceEvent::kSegmentReleased: return MemoryAction::kSegmentFree;
  }
  return MemoryAction::kAlloc;
}

void record(const MemoryEvent& event) {
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mutex);
  if (!h.enabled) return;
  if (h.context != RecordContext::kNever) {
    if (event.action == MemoryAction::kAlloc && event.context) {
      h.live_contexts[event.address] = event.context;
    } else if (event.action == MemoryAction::kFreeRequested) {
      h.live_contexts.erase(event.address);
    }
  }
  if (!h.trace || h.max_entries == 0) return;
  std::deque<MemoryEvent>& trace = h.traces[event.device];
  if (trace.size() >= h.max_entries) trace.pop_front();
  MemoryEvent kept = event;
  // The trace keeps allocation stacks from "alloc" on, free stacks at "all".
  const bool keep = event.action == MemoryAction::kFreeRequested ? h.context == RecordContext::kAll
                                                                 : h.context >= RecordContext::kAlloc;
  if (!keep) kept.context.reset();
  trace.push_back(std::move(kept));
}

// Runs under an allocator's mutex: takes only the history's mutex, which is
// never held while calling into an allocator.
void on_block(vnpu::BlockTraceEvent event, const void* address, std::size_t bytes, const vnpu::Stream& stream,
              const vnpu::PoolId& pool) {
  if (tracing()) sanitizer_block_event(event, address, bytes, stream);
  const size_t listeners = g_listener_count.load(std::memory_order_acquire);
  const bool on = g_history_on.load(std::memory_order_acquire);
  if (listeners == 0 && !on) return;
  MemoryEvent e{action_of(event),
                stream.device_index(),
                reinterpret_cast<std::uintptr_t>(address),
                bytes,
                const_cast<vnpu::Stream*>(&stream),
                stream.stream_index(),
                now_us(),
                nullptr,
                pool};
  if ((e.action == MemoryAction::kAlloc || e.action == MemoryAction::kFreeRequested) && t_pending_context) {
    e.context = std::move(t_pending_context);
  }
  if (on) record(e);
  for (size_t i = 0; i < listeners; ++i) (*g_listeners[i])(e);
}

}  // namespace

void refresh_block_hook() {
  const bool wanted = tracing() || g_history_on.load() || g_listener_count.load() > 0;
  vnpu::set_block_trace_hook(wanted ? &on_block : nullptr);
}

void record_memory_history(bool enabled, bool trace, RecordContext context, bool cpp_stacks, size_t max_entries,
                           bool clear) {
  History& h = history();
  {
    std::lock_guard<std::mutex> lock(h.mutex);
    h.enabled = enabled;
    h.trace = enabled && trace;
    h.context = enabled ? context : RecordContext::kNever;
    h.cpp_stacks = cpp_stacks;
    h.max_entries = max_entries;
    if (clear || !enabled) {
      h.traces.clear();
      h.live_contexts.clear();
    }
    for (auto& [device, events] : h.traces) {
      while (events.size() > max_entries) events.pop_front();
    }
    g_context.store(static_cast<int>(h.context));
    g_cpp_stacks.store(cpp_stacks);
    g_history_on.store(enabled, std::memory_order_release);
  }
  refresh_block_hook();
}

bool memory_history_enabled() { return g_history_on.load(std::memory_order_acquire); }

std::vector<MemoryEvent> memory_trace(int device) {
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mutex);
  auto it = h.traces.find(device);
  if (it == h.traces.end()) return {};
  return std::vector<MemoryEvent>(it->second.begin(), it->second.end());
}

std::shared_ptr<torch::CapturedTraceback> allocation_context(std::uintptr_t address) {
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mutex);
  auto it = h.live_contexts.find(address);
  return it != h.live_contexts.end() ? it->second : nullptr;
}

void add_memory_event_listener(std::function<void(const MemoryEvent&)> listener) {
  {
    std::lock_guard<std::mutex> lock(g_listener_mutex);
    const size_t n = g_listener_count.load();
    TORCH_CHECK(n < kMaxListeners, "attachAllocatorTraceTracker: at most ", kMaxListeners,
                " trackers can be attached on vNPU");
    g_listeners[n] = new std::function<void(const MemoryEvent&)>(std::move(listener));  // lives as long as the process
    g_listener_count.store(n + 1, std::memory_order_release);
  }
  refresh_block_hook();
}

ContextScope::ContextScope(RecordContext needed) {
  if (!g_history_on.load(std::memory_order_relaxed)) return;
  if (g_context.load(std::memory_order_relaxed) < static_cast<int>(needed)) return;
  // Python frames (the GIL is taken when this thread may), TorchScript ones,
  // and C++ ones for stacks="all".
  t_pending_context = torch::CapturedTraceback::gather(true, true, g_cpp_stacks.load(std::memory_order_relaxed));
  gathered_ = true;
}

ContextScope::~ContextScope() {
  if (gathered_) t_pending_context.reset();
}

}  // namespace torch_npu
