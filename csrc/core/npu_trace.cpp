#include "csrc/core/npu_trace.h"

#include <c10/core/Stream.h>

#include <mutex>
#include <utility>

#include <vnpu/caching_allocator.h>
#include <vnpu/stream.h>

#include "csrc/core/npu_memory_history.h"
#include "csrc/core/npu_stream.h"

namespace torch_npu {
namespace detail {
std::atomic<bool> g_tracing{false};
}  // namespace detail

namespace {

std::mutex g_buffer_mutex;
std::vector<TraceRecord> g_buffer;  // guarded by g_buffer_mutex

}  // namespace

// Called under an allocator's mutex: only the buffer's mutex is taken here,
// which is never held while calling into an allocator (no lock cycle).
void sanitizer_block_event(vnpu::BlockTraceEvent event, const void* address, std::size_t bytes,
                           const vnpu::Stream& stream) {
  // The sanitizer follows blocks from hand-out to return; segments and free
  // requests are the memory history's (npu_memory_history.h).
  if (event != vnpu::BlockTraceEvent::kHandedOut && event != vnpu::BlockTraceEvent::kReturned) return;
  const TraceKind kind = event == vnpu::BlockTraceEvent::kHandedOut ? TraceKind::kMemoryAllocation
                                                                    : TraceKind::kMemoryDeallocation;
  trace(kind, static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(address)), stream.device_index(),
        stream_id_of_index(stream.stream_index()), static_cast<std::int64_t>(bytes));
}

void detail::append_trace(const TraceRecord& record) {
  std::lock_guard<std::mutex> lock(g_buffer_mutex);
  if (g_tracing.load(std::memory_order_relaxed)) g_buffer.push_back(record);
}

void trace_stream(TraceKind kind, const c10::Stream& stream) {
  if (tracing()) detail::append_trace({kind, stream.device_index(), stream.id()});
}

void trace_event_on_stream(TraceKind kind, const void* event, const c10::Stream& stream) {
  if (tracing()) {
    detail::append_trace({kind, trace_handle(event), stream.device_index(), stream.id()});
  }
}

void set_tracing(bool on) {
  std::lock_guard<std::mutex> lock(g_buffer_mutex);
  detail::g_tracing.store(on, std::memory_order_relaxed);
  refresh_block_hook();
  if (!on) g_buffer.clear();
}

std::vector<TraceRecord> drain_trace() {
  std::lock_guard<std::mutex> lock(g_buffer_mutex);
  return std::exchange(g_buffer, {});
}

}  // namespace torch_npu
