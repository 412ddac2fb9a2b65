// Tracing of stream tasks: the hook a profiler plugs into.
//
// Every task carries a kind, a correlation id (set by the host code that
// launches it, e.g. the id of the profiler's host-side op record) and, while
// tracing is on, the time it was enqueued. With a trace hook installed, each
// stream worker calls it after every task with the task's start and end
// times, so a profiler sees device activity without touching the hot path
// when tracing is off (one relaxed atomic load per task).
//
// Thread-safety: set_trace_hook() may be called at any time from any thread;
// the hook itself runs on stream worker threads, concurrently, and must be
// thread-safe and must not launch onto, or wait for, any stream.
#pragma once

#include <cstdint>

namespace vnpu {

enum class TaskKind : std::uint8_t {
  kKernel,   // an op's stage 2
  kCopy,     // a memory copy (H2D, D2H, D2D)
  kMarker,   // an event record
  kWait,     // a stream-wait-event (waits for another stream)
  kHost,     // host work in stream order (gates, sleeps, callbacks)
  kGraph,    // the replay of a captured graph (graph.h)
};

const char* task_kind_name(TaskKind kind);

// What a task is, as a profiler sees it.
struct TaskInfo {
  const char* name = nullptr;      // string literal or interned op name
  TaskKind kind = TaskKind::kKernel;
  std::uint64_t correlation_id = 0;  // 0: none
  std::int64_t enqueue_ns = 0;       // steady clock; 0 when tracing was off
  std::int32_t enqueue_thread = 0;   // the enqueuing thread's system id; 0 when tracing was off
};

struct TaskRecord {
  TaskInfo info;
  int device_index = 0;
  int stream_index = 0;
  std::uint64_t seq = 0;
  std::int64_t start_ns = 0;  // steady clock
  std::int64_t end_ns = 0;
  bool failed = false;
  // The threads the task's body computed with, as it reported them
  // (set_running_task_block_dim); 0 when it reported none (copies, markers).
  int block_dim = 0;
};

using TraceHook = void (*)(const TaskRecord& record);

// nullptr turns tracing off.
void set_trace_hook(TraceHook hook);
TraceHook trace_hook();  // acquire load; nullptr when off

// Nanoseconds on the steady clock (the clock of every TaskRecord).
std::int64_t steady_now_ns();

// The calling thread's system thread id (gettid), as profilers name threads.
std::int32_t this_thread_system_id();

// Reported by a running task's body: the threads it computes with (a
// kernel's intra-op team, which the adaptor chooses: vnpu/intra_op_threads.h).
// Profiles show it where CANN's show a kernel's block dim, the AI cores it
// ran on. A thread-local store: cheap enough to call whether or not a trace
// hook is installed; a body that reports twice (a GEMM that asks for more
// threads after its first rows) leaves the larger count.
void set_running_task_block_dim(int threads);
// What the calling thread's running task reported so far (0: nothing),
// replaced by `value`: 0 to start a task's count, or the count of a task
// the thread was running before (Stream's caller gate).
int exchange_running_task_block_dim(int value);

// The correlation id given to tasks the calling thread enqueues (0: none).
void set_correlation_id(std::uint64_t id);
std::uint64_t correlation_id();

}  // namespace vnpu
