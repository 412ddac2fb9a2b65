// The synchronisation and memory events torch_npu.npu._sanitizer analyses.
//
// Note [Sanitizer trace]
// While tracing is on, each place where an npu event, stream or block changes
// state appends one small record to a process-wide buffer, and the sanitizer
// (Python) drains the buffer, in order, at every op it intercepts. A buffer,
// not a Python callback, because blocks are returned and events destroyed on
// any thread (stream workers included) and blocks with the allocator's mutex
// held: calling into Python there (taking the GIL) could deadlock with a host
// thread that holds the GIL while it waits for that stream. Off, a site costs
// one relaxed atomic load. docs/sanitizer.md has the whole design.
//
// Thread-safety: every function may be called from any thread; trace() takes
// the buffer's mutex only while tracing is on, and never waits for a stream.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace c10 {
class Stream;
}

namespace vnpu {
class Stream;
enum class BlockTraceEvent : std::uint8_t;  // vnpu/caching_allocator.h
}

namespace torch_npu {

// What a record's fields a..d mean is given per kind: `event` is the handle
// torch.Event.event_id shows, `device`/`stream` a stream's device index and
// id (c10::Stream::id()), `ptr` a block's address.
enum class TraceKind : std::uint8_t {
  kEventCreation,          // event
  kEventDeletion,          // event
  kEventRecord,            // event, device, stream
  kEventWait,              // event, device, stream (the stream waits)
  kEventSynchronization,   // event (the host waited)
  kStreamCreation,         // device, stream
  kStreamSynchronization,  // device, stream (the host waited)
  kDeviceSynchronization,  // device (-1: every device)
  kMemoryAllocation,       // ptr, device, stream, bytes (handed out)
  kMemoryDeallocation,     // ptr, device, stream, bytes (back in the allocator)
};

struct TraceRecord {
  TraceKind kind;
  std::int64_t a = 0, b = 0, c = 0, d = 0;
};

namespace detail {
extern std::atomic<bool> g_tracing;
void append_trace(const TraceRecord& record);
}  // namespace detail

inline bool tracing() { return detail::g_tracing.load(std::memory_order_relaxed); }

// Appends a record when tracing is on; nothing otherwise.
inline void trace(TraceKind kind, std::int64_t a = 0, std::int64_t b = 0, std::int64_t c = 0, std::int64_t d = 0) {
  if (tracing()) detail::append_trace({kind, a, b, c, d});
}
// An event handle as a record field (the value torch.Event.event_id shows).
inline std::int64_t trace_handle(const void* event) {
  return static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(event));
}
inline void trace_event(TraceKind kind, const void* event) { trace(kind, trace_handle(event)); }
// The stream forms: a stream's device and id as fields after `event` (if any).
void trace_stream(TraceKind kind, const c10::Stream& stream);
void trace_event_on_stream(TraceKind kind, const void* event, const c10::Stream& stream);

// Turns tracing on or off (the caching allocators' block events reach it
// through npu_memory_history.h's hook). Turning it off drops what was not
// drained.
void set_tracing(bool on);
// A block handed out or returned, while tracing (called by that hook).
void sanitizer_block_event(vnpu::BlockTraceEvent event, const void* address, std::size_t bytes,
                           const vnpu::Stream& stream);
// The records since the last drain, oldest first; the buffer is left empty.
std::vector<TraceRecord> drain_trace();

}  // namespace torch_npu
