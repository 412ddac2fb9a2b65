// Stream: an in-order launch queue drained by one worker thread.
//
// Producers (any thread) append tasks to a bounded ring of kCapacity slots;
// the worker runs them in order. Every task gets a sequence number when it is
// enqueued (1, 2, 3 ...); the worker publishes the number of the last task it
// finished. Completion is decided by comparing sequence numbers, never by
// looking at whether the queue is empty (the last task may still be running).
//
// Note [Asynchronous errors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// An exception escaping a task cannot reach its caller. The stream records
// it as its *pending error* (an AsyncError: task, cause, error code, origin)
// and keeps running later tasks: they are independent work, or they read the
// failed task's outputs, which the adaptor has poisoned (NaN / a marker
// pattern), so nothing downstream reads stale memory as if it were valid.
// Only the first error is kept until it is reported.
//
// The error reaches every synchronisation point that depends on the failed
// work:
//   - synchronize() / wait_for(seq) of this stream throw KernelError and
//     clear the pending error (reported once per stream);
//   - an Event recorded on this stream after the failure carries the error:
//     Event::synchronize() throws it, and a stream that waits on the event
//     (Event::block, Stream.wait_stream) adopts it as its own pending error,
//     so that stream's next sync point throws it too.
// The process stays usable: after the report, new work runs normally.
//
// Synchronous mode (ASCEND_LAUNCH_BLOCKING=1 / TASK_QUEUE_ENABLE=0): enqueue()
// drains the queue and then runs the task inline on the caller; its exception
// propagates from enqueue() directly.
//
// Fork: a stream's worker thread does not exist in a forked child. Every
// entry point of a stream created before fork() throws Error(kBadFork) in the
// child instead of waiting forever.
//
// Thread-safety: every public method may be called from any thread.
// Blocking: enqueue() blocks only while the ring is full (back-pressure);
// synchronize()/wait_for() block until the work is done. No method blocks
// while holding a lock another producer or the worker needs, and blocking
// host waits run inside a HostWaitScope (host_wait.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "vnpu/async_error.h"
#include "vnpu/busy_clock.h"
#include "vnpu/graph.h"
#include "vnpu/task.h"
#include "vnpu/trace.h"

namespace vnpu {

class Stream {
 public:
  // torch_npu's task queue has 4096 slots.
  static constexpr std::size_t kCapacity = 4096;
  // A producer that finds the ring full waits until this many slots are free.
  static constexpr std::size_t kRefillSlots = kCapacity / 8;

  // `busy` (optional, outliving the stream) is told when the worker takes up
  // and finishes batches of tasks (the device's utilization).
  Stream(int device_index, int stream_index, int priority, bool synchronous, BusyClock* busy = nullptr);
  ~Stream();  // drains outstanding tasks, then joins the worker
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device_index() const { return device_index_; }
  int stream_index() const { return stream_index_; }
  int priority() const { return priority_; }
  bool synchronous() const { return synchronous_; }

  // Appends a task; returns its sequence number.
  template <typename F>
  std::uint64_t enqueue(const char* name, F&& fn) {
    return enqueue(TaskKind::kKernel, name, std::forward<F>(fn));
  }

  template <typename F>
  std::uint64_t enqueue(TaskKind kind, const char* name, F&& fn) {
    // Moved once more, into the slot, through the erased interface: one
    // enqueue path for typed and erased callables.
    std::decay_t<F> callable(std::forward<F>(fn));
    return enqueue_erased(kind, name, erase(callable));
  }

  // enqueue() for a callable known only through `callable` (moved from).
  std::uint64_t enqueue_erased(TaskKind kind, const char* name, const ErasedCallable& callable);

  // Runs `fn` on the calling thread, in stream order: after every task
  // enqueued before it, before every task enqueued after it (the worker is
  // held at a gate meanwhile). Exceptions from `fn` propagate to the caller
  // and do not become the stream's error. Returns the gate's sequence number.
  template <typename F>
  std::uint64_t run_on_caller(const char* name, F&& fn) {
    check_not_capturing(name);
    if (synchronous_) return enqueue(TaskKind::kHost, name, std::forward<F>(fn));
    CallerGate gate(*this, name);
    fn();
    return gate.seq();
  }

  // Sequence number of the last enqueued task (0 when none).
  std::uint64_t last_enqueued() const { return queued_seq_.load(std::memory_order_acquire); }
  // Sequence number of the last completed task (run or failed).
  std::uint64_t last_completed() const { return completed_seq_.load(std::memory_order_acquire); }

  // True when every task enqueued so far has completed. Does not throw.
  bool query() const { return last_completed() >= last_enqueued(); }

  // Blocks until task `seq` has completed, then reports the pending error
  // (throws KernelError and clears it).
  void wait_for(std::uint64_t seq);

  // Blocks until every task enqueued so far has completed; reports errors.
  void synchronize() { wait_for(last_enqueued()); }

  // Blocks until task `seq` has completed without reporting errors.
  // Used by tasks of other streams (stream-wait-event). Throws
  // Error(kInvalidValue) for a task that was never enqueued.
  void wait_completed(std::uint64_t seq) const;

  // Like wait_completed, but gives up at `deadline`: returns false if task
  // `seq` had not completed by then (collectives' watchdogs).
  bool wait_completed_until(std::uint64_t seq, std::chrono::steady_clock::time_point deadline) const;

  // The pending error without clearing it (nullptr when none).
  std::shared_ptr<const AsyncError> pending_error() const;
  // Takes the pending error, if any, without waiting (nullptr when none).
  std::shared_ptr<const AsyncError> take_error();
  // Clears the pending error if it is `error` (it was reported elsewhere).
  void clear_error_if(const AsyncError* error);
  // Makes `error` (from another stream, through an event) this stream's
  // pending error unless one is pending already.
  void adopt_error(std::shared_ptr<const AsyncError> error);
  bool has_error() const { return has_error_.load(std::memory_order_acquire); }

  // The abort path (a watchdog that gave up on work that never completes, a
  // collective whose peer died): records `reason` as the pending error and
  // makes every host wait on this stream that cannot complete throw
  // Error(kAborted) at once instead of blocking. Tasks that wait on their own
  // (a collective polling its peers) should poll aborted() and give up. The
  // abort ends when the pending error is reported (take_error / a sync).
  void abort(const std::string& reason);
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  // Throws Error(kBadFork) when called in a forked child of the process
  // that created this stream.
  void check_not_forked() const;

  // Graph capture (graph.h): from begin_capture on, enqueued tasks go into
  // `graph` instead of the queue, until end_capture returns it. Work
  // enqueued before the capture stays queued and runs as usual. Throws
  // Error(kStreamCapture) when the stream already captures / does not.
  void begin_capture(std::shared_ptr<Graph> graph);
  std::shared_ptr<Graph> end_capture();
  bool capturing() const { return capturing_.load(std::memory_order_acquire); }
  // The graph this stream captures into (nullptr when not capturing), and
  // how many tasks it has added to it since its begin_capture. Several
  // streams may capture into one graph (a capture forked onto other
  // streams through events; the adaptor's NpuGraph manages the fork/join).
  std::shared_ptr<Graph> capture_graph();
  std::size_t captured_tasks();
  // Throws Error(kStreamCapture) naming `what` while the stream captures.
  void check_not_capturing(const char* what) const;

  // Enqueues one task that runs `graph` (Graph::run); returns its sequence
  // number. The graph stays alive until the task has run.
  std::uint64_t enqueue_replay(std::shared_ptr<const Graph> graph);

  // The stream whose task the calling thread is running (its worker, or a
  // run_on_caller caller inside fn); nullptr outside tasks. Memory a running
  // task allocates must come from CachingAllocator::allocate_for_running_task.
  static Stream* running_on_this_thread();

 private:
  // Holds the worker at a gate task while the caller runs (run_on_caller).
  class CallerGate {
   public:
    CallerGate(Stream& stream, const char* name);
    ~CallerGate();  // opens the gate, also when the caller's work threw
    std::uint64_t seq() const { return seq_; }

   private:
    struct State;
    std::shared_ptr<State> state_;
    std::uint64_t seq_ = 0;
    Stream* previous_running_ = nullptr;
    int previous_block_dim_ = 0;  // the caller's own task's, when it runs one
  };

  std::uint64_t run_inline(Task& task);
  // Locks producer_mutex_ once slot next_seq_ is free, waiting for the
  // worker (with the lock released) while the ring is full.
  std::unique_lock<std::mutex> lock_free_slot();
  void publish(std::uint64_t seq);
  static constexpr std::size_t kWarmSlotBytes = 512;
  static void warm_slot(const Task& slot);
  void worker_loop();
  void run_task(Task& task, std::uint64_t seq);
  void record_error(const Task& task, std::uint64_t seq, std::exception_ptr error);
  // Wakes the host waiters once task `completed` reaches the earliest task
  // one of them waits for.
  void notify_waiters(std::uint64_t completed);
  [[noreturn]] void throw_aborted(std::uint64_t seq) const;

  const int device_index_;
  const int stream_index_;
  const int priority_;
  const bool synchronous_;
  const unsigned fork_generation_;  // process generation that created the stream
  BusyClock* const busy_;

  std::unique_ptr<Task[]> ring_;

  // Note [Lines of one writer]: the producer's state, the two sequence
  // numbers and the worker's sleep/wake state each start a cache line of
  // their own, so the line a thread writes on every launch (or every task)
  // holds nothing the other side reads on every task (or launch): the
  // worker reads ring_ and busy_ above for each task, and with them on the
  // producer mutex's line, each launch's lock took that line from the
  // worker's core and the worker's next task took it back.
  alignas(64) std::mutex producer_mutex_;  // serialises producers
  std::uint64_t next_seq_ = 1;    // guarded by producer_mutex_
  std::uint64_t free_through_ = kCapacity;  // slots up to this seq are free; guarded by producer_mutex_
  // enqueued_seq_ again, for the host's readers (last_enqueued(): every
  // free of a block, events): the worker polls enqueued_seq_'s line, so a
  // read of it on the host's core waited for that line to come back. This
  // copy is written after enqueued_seq_ (never ahead of it) on the
  // producer's own line, which the worker never reads.
  std::atomic<std::uint64_t> queued_seq_{0};
  std::shared_ptr<Graph> capture_;  // guarded by producer_mutex_
  std::size_t captured_tasks_ = 0;  // guarded by producer_mutex_
  std::atomic<bool> capturing_{false};

  alignas(64) std::atomic<std::uint64_t> enqueued_seq_{0};
  alignas(64) std::atomic<std::uint64_t> completed_seq_{0};

  // Worker sleep/wake.
  alignas(64) std::mutex wake_mutex_;
  std::condition_variable wake_cv_;
  std::atomic<bool> worker_sleeping_{false};
  // Launches publish without a fence; the worker fences the process before
  // it sleeps (Note [Asymmetric wake-up fence] in runtime/src/process_fence.h).
  const bool asymmetric_wake_;
  std::atomic<bool> stopping_{false};

  // Host-side waiters (synchronize, back-pressure). wake_at_ is the
  // earliest task a blocked waiter waits for (no waiter: the maximum); it is
  // lowered by waiters and reset by the worker, both under done_mutex_.
  mutable std::mutex done_mutex_;
  mutable std::condition_variable done_cv_;
  mutable std::atomic<std::uint64_t> wake_at_{kNoWaiter};
  static constexpr std::uint64_t kNoWaiter = ~std::uint64_t{0};

  // Pending error.
  std::atomic<bool> has_error_{false};
  std::atomic<bool> aborted_{false};
  mutable std::mutex error_mutex_;
  std::shared_ptr<const AsyncError> error_;  // guarded by error_mutex_

  std::thread worker_;
};

}  // namespace vnpu
