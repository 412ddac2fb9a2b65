// Stream: an in-order launch queue drained by one worker thread.
//
// Producers (any thread) append tasks to a bounded ring of kCapacity slots;
// the worker runs them in order. Every task gets a sequence number when it is
// enqueued (1, 2, 3 ...); the worker publishes the number of the last task it
// finished. Completion is decided by comparing sequence numbers, never by
// looking at whether the queue is empty (the last task may still be running).
//
// Errors: an exception escaping a task becomes the stream's *sticky error*.
// Tasks enqueued after it are skipped (their inputs may be garbage) until the
// error is reported by the next synchronisation point (synchronize(),
// wait_for(), or an Event::synchronize on this stream), which throws
// Error(kKernelFailed) naming the task and then clears the error, so the
// stream is usable again.
//
// Synchronous mode (ASCEND_LAUNCH_BLOCKING=1 / TASK_QUEUE_ENABLE=0): enqueue()
// drains the queue and then runs the task inline on the caller; its exception
// propagates from enqueue() directly.
//
// Thread-safety: every public method may be called from any thread.
// Blocking: enqueue() blocks only while the ring is full (back-pressure);
// synchronize()/wait_for() block until the work is done.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "vnpu/task.h"

namespace vnpu {

class Stream {
 public:
  // torch_npu's task queue has 4096 slots.
  static constexpr std::size_t kCapacity = 4096;

  Stream(int device_index, int stream_index, int priority, bool synchronous);
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
    if (synchronous_) {
      // Stored in a stack Task rather than a std::function so that move-only
      // callables work in both modes.
      Task task;
      task.emplace(name, std::forward<F>(fn));
      return run_inline(task);
    }
    std::unique_lock<std::mutex> lock(producer_mutex_);
    const std::uint64_t seq = next_seq_;
    Task& slot = wait_for_free_slot(seq);
    slot.emplace(name, std::forward<F>(fn));
    publish(seq);
    return seq;
  }

  // Sequence number of the last enqueued task (0 when none).
  std::uint64_t last_enqueued() const { return enqueued_seq_.load(std::memory_order_acquire); }
  // Sequence number of the last completed task (run, failed or skipped).
  std::uint64_t last_completed() const { return completed_seq_.load(std::memory_order_acquire); }

  // True when every task enqueued so far has completed. Does not throw.
  bool query() const { return last_completed() >= last_enqueued(); }

  // Blocks until task `seq` has completed, then reports a pending sticky
  // error (throws Error(kKernelFailed)).
  void wait_for(std::uint64_t seq);

  // Blocks until every task enqueued so far has completed; reports errors.
  void synchronize() { wait_for(last_enqueued()); }

  // Blocks until task `seq` has completed without reporting errors.
  // Used by tasks of other streams (stream-wait-event). Throws
  // Error(kInvalidValue) for a task that was never enqueued.
  void wait_completed(std::uint64_t seq) const;

  // Takes the sticky error, if any, without waiting. Returns "" when none.
  std::string take_error();
  bool has_error() const { return has_error_.load(std::memory_order_acquire); }

 private:
  std::uint64_t run_inline(Task& task);
  Task& wait_for_free_slot(std::uint64_t seq);
  void publish(std::uint64_t seq);
  void worker_loop();
  void record_error(const char* task_name, const char* what);
  void notify_waiters();

  const int device_index_;
  const int stream_index_;
  const int priority_;
  const bool synchronous_;

  std::unique_ptr<Task[]> ring_;
  std::mutex producer_mutex_;     // serialises producers
  std::uint64_t next_seq_ = 1;    // guarded by producer_mutex_

  alignas(64) std::atomic<std::uint64_t> enqueued_seq_{0};
  alignas(64) std::atomic<std::uint64_t> completed_seq_{0};

  // Worker sleep/wake.
  std::mutex wake_mutex_;
  std::condition_variable wake_cv_;
  std::atomic<bool> worker_sleeping_{false};
  std::atomic<bool> stopping_{false};

  // Host-side waiters (synchronize, back-pressure).
  mutable std::mutex done_mutex_;
  mutable std::condition_variable done_cv_;
  mutable std::atomic<int> waiters_{0};

  // Sticky error.
  std::atomic<bool> has_error_{false};
  std::mutex error_mutex_;
  std::string error_message_;

  std::thread worker_;
};

}  // namespace vnpu
