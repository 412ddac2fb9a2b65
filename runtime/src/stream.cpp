#include "vnpu/stream.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <system_error>

#if defined(__linux__)
#include <pthread.h>
#endif

#include "vnpu/error.h"
#include "vnpu/host_wait.h"
#include "process_fence.h"
#include "prefetch.h"
#include "spin.h"

namespace vnpu {
namespace {

using detail::spin_until;
using detail::spin_until_with_backoff;

thread_local Stream* t_running = nullptr;  // Stream::running_on_this_thread

// Marks the calling thread as running a task of `stream` for its lifetime.
class RunningTaskOf {
 public:
  explicit RunningTaskOf(Stream* stream) : previous_(t_running) { t_running = stream; }
  ~RunningTaskOf() { t_running = previous_; }
  RunningTaskOf(const RunningTaskOf&) = delete;
  RunningTaskOf& operator=(const RunningTaskOf&) = delete;

 private:
  Stream* previous_;
};

// Bumped in the child after fork(): streams made by an earlier generation
// have no worker there.
std::atomic<unsigned> g_fork_generation{0};
void on_fork_in_child() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }
[[maybe_unused]] const int g_atfork_registered = pthread_atfork(nullptr, nullptr, &on_fork_in_child);

// How long the worker and host waiters spin before they block. Short enough
// not to burn a core, long enough that a steady stream of small launches
// never pays for a futex round trip.
//
// The worker spins longer: a host that runs Python between its launches
// (torch.compile's runtime between two compiled graphs, an optimizer's
// bookkeeping) leaves gaps of about a hundred microseconds, and a launch that
// finds the worker asleep costs the host a futex wake. 150 us was the
// shortest spin that covered those gaps in bench_compile (the figures:
// benchmarks/README.md, "Figures behind the Notes").
constexpr std::chrono::microseconds kWorkerSpinTime{150};
constexpr std::chrono::microseconds kHostSpinTime{30};
constexpr unsigned kWorkerPollPauses = 16;

void name_worker_thread(std::thread& thread, int device_index, int stream_index) {
#if defined(__linux__)
  char name[16];  // Linux limits thread names to 15 characters
  std::snprintf(name, sizeof(name), "vnpu%d-s%d", device_index, stream_index);
  // Only a debugging aid: a failure is harmless, so its status is ignored.
  (void)pthread_setname_np(thread.native_handle(), name);
#else
  (void)thread;
  (void)device_index;
  (void)stream_index;
#endif
}

}  // namespace

Stream::Stream(int device_index, int stream_index, int priority, bool synchronous, BusyClock* busy)
    : device_index_(device_index),
      stream_index_(stream_index),
      priority_(priority),
      synchronous_(synchronous),
      fork_generation_(g_fork_generation.load(std::memory_order_relaxed)),
      busy_(busy),
      asymmetric_wake_(!synchronous && detail::process_wide_fence_available()) {
  // A synchronous stream runs everything on the caller: no ring, no worker.
  if (synchronous_) return;
  ring_.reset(new Task[kCapacity]);
  try {
    worker_ = std::thread(&Stream::worker_loop, this);
  } catch (const std::system_error& e) {
    throw Error(ErrorCode::kInternal, "cannot start the worker thread of NPU " +
                                          std::to_string(device_index_) + " stream " +
                                          std::to_string(stream_index_) + ": " + e.what());
  }
  name_worker_thread(worker_, device_index_, stream_index_);
}

Stream::~Stream() {
  if (synchronous_) return;
  // In a forked child there is no worker to drain or join.
  if (fork_generation_ != g_fork_generation.load(std::memory_order_relaxed)) {
    worker_.detach();
    return;
  }
  // Drain first: tasks may hold resources their owners expect to be released
  // only after they ran. A pending sticky error is dropped with the stream.
  wait_completed(last_enqueued());
  {
    // Set under the worker's mutex so the worker cannot miss it between its
    // predicate check and its wait.
    std::lock_guard<std::mutex> lock(wake_mutex_);
    stopping_.store(true);
    wake_cv_.notify_one();
  }
  worker_.join();
}

std::uint64_t Stream::enqueue_erased(TaskKind kind, const char* name, const ErasedCallable& callable) {
  check_not_forked();
  TaskInfo info{name, kind, correlation_id(), 0};
  if (capturing_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(producer_mutex_);
    if (capture_) {
      capture_->append(info, callable);
      ++captured_tasks_;
      return next_seq_ - 1;  // nothing was queued
    }
  }
  if (synchronous_) {
    Task task;
    task.emplace(info, callable);
    return run_inline(task);
  }
  if (trace_hook() != nullptr) {
    info.enqueue_ns = steady_now_ns();
    info.enqueue_thread = this_thread_system_id();
  }
  std::unique_lock<std::mutex> lock = lock_free_slot();
  const std::uint64_t seq = next_seq_;
  ring_[seq % kCapacity].emplace(info, callable);
  publish(seq);
  warm_slot(ring_[(seq + 1) % kCapacity]);
  return seq;
}

std::unique_lock<std::mutex> Stream::lock_free_slot() {
  for (;;) {
    std::unique_lock<std::mutex> lock(producer_mutex_);
    // Slot seq % kCapacity was last used by task seq - kCapacity; the worker
    // resets a slot before it publishes that task's completion.
    // Note [Free slots known to the producer]: the worker writes
    // completed_seq_ after every task, so reading it costs the producer a
    // cache line from the worker's core on every launch. Slots up to
    // free_through_ were seen free already (completion only grows).
    const std::uint64_t seq = next_seq_;
    if (seq <= free_through_) return lock;
    free_through_ = completed_seq_.load(std::memory_order_acquire) + kCapacity;
    if (seq <= free_through_) return lock;
    // Full: wait without the lock, so other producers (and a host thread
    // that must re-acquire Python's GIL after the wait) are not stuck
    // behind us; another producer may take the slot first, so look again.
    // Wait for kRefillSlots free slots, not one: a host that runs ahead of
    // the device then blocks once per kRefillSlots tasks instead of
    // spinning for a slot after every task, and its core is the device's
    // meanwhile.
    lock.unlock();
    wait_completed(seq - kCapacity + kRefillSlots);
  }
}

void Stream::warm_slot(const Task& slot) {
  // Note [Warm the next slot]: the next launch writes its task into slot
  // seq + 1, untouched since the worker finished task seq + 1 - kCapacity,
  // so its lines sit in another core's cache or in L3. Asking for them for
  // writing now lets the fetch overlap the caller's own work (Python,
  // dispatch) until the next launch, instead of stalling that launch's
  // stores. The first kWarmSlotBytes cover the header and a small kernel's
  // captures (three TensorRefs and its outputs).
  const char* bytes = reinterpret_cast<const char*>(&slot);
  for (std::size_t offset = 0; offset < kWarmSlotBytes; offset += 64) {
    detail::prefetch_for_write(bytes + offset);
  }
}

void Stream::publish(std::uint64_t seq) {
  // The store of enqueued_seq_ and the load of worker_sleeping_ pair with the
  // worker's store of worker_sleeping_ and load of enqueued_seq_ (Dekker): at
  // least one side sees the other, so a wake-up is never lost. The
  // store-load barrier this side needs is the worker's process-wide fence
  // where there is one (Note [Asymmetric wake-up fence], process_fence.h).
  if (asymmetric_wake_) {
    enqueued_seq_.store(seq, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the load after the store
  } else {
    enqueued_seq_.store(seq, std::memory_order_seq_cst);
  }
  next_seq_ = seq + 1;
  queued_seq_.store(seq, std::memory_order_release);
  if (worker_sleeping_.load(std::memory_order_seq_cst)) {
    // Taking the mutex orders this notify after the worker's wait began (or
    // after its predicate check, which then sees the new task).
    std::lock_guard<std::mutex> lock(wake_mutex_);
    wake_cv_.notify_one();
  }
}

std::uint64_t Stream::run_inline(Task& task) {
  // Holding the producer mutex keeps inline tasks of concurrent callers in
  // order, exactly like the queue does. Tasks must not launch onto their own
  // synchronous stream.
  std::lock_guard<std::mutex> lock(producer_mutex_);
  const std::uint64_t seq = next_seq_++;
  enqueued_seq_.store(seq, std::memory_order_seq_cst);
  queued_seq_.store(seq, std::memory_order_release);

  // Completion is published even when the task throws, so events and
  // synchronize() behave as in asynchronous mode; the exception itself goes
  // straight to the caller instead of becoming a sticky error.
  struct CompleteOnExit {
    Stream* stream;
    Task& task;
    std::uint64_t seq;
    ~CompleteOnExit() {
      task.reset();
      stream->completed_seq_.store(seq, std::memory_order_seq_cst);
      stream->notify_waiters(seq);
    }
  } complete{this, task, seq};
  RunningTaskOf running(this);
  task.run();
  return seq;
}

void Stream::worker_loop() {
  mark_stream_worker_thread();
  std::uint64_t done = 0;  // last sequence number this worker completed
  for (;;) {
    const std::uint64_t available = enqueued_seq_.load(std::memory_order_acquire);
    if (available == done) {
      // Note [A worker that polls less often]: each read of enqueued_seq_
      // takes a copy of its line to this core, and the host's next launch
      // must then take the line back before its store completes, which the
      // launch's next locked instruction (a mutex, the GIL) waits for. Read
      // at most every kWorkerPollPauses pauses, most launches find the line
      // still theirs.
      if (spin_until_with_backoff(kWorkerSpinTime, kWorkerPollPauses,
                                  [&] { return enqueued_seq_.load(std::memory_order_acquire) != done; })) {
        continue;
      }
      std::unique_lock<std::mutex> lock(wake_mutex_);
      worker_sleeping_.store(true, std::memory_order_seq_cst);
      auto woken = [&] { return stopping_.load() || enqueued_seq_.load(std::memory_order_seq_cst) != done; };
      if (!asymmetric_wake_ || detail::process_wide_fence()) {
        wake_cv_.wait(lock, woken);
      } else {
        // The fence failed, so a launch may have missed that this worker
        // sleeps: look again every millisecond rather than wait for a wake.
        while (!wake_cv_.wait_for(lock, std::chrono::milliseconds(1), woken)) {
        }
      }
      worker_sleeping_.store(false, std::memory_order_relaxed);
      // The destructor drains before it sets stopping_, so nothing is left.
      if (stopping_.load() && enqueued_seq_.load() == done) return;
      continue;
    }

    if (busy_ != nullptr) busy_->begin();
    for (std::uint64_t seq = done + 1; seq <= available; ++seq) {
      Task& task = ring_[seq % kCapacity];
      run_task(task, seq);
      // Destroy the captures before completion is published: a waiter that
      // sees the task complete may rely on its captured resources being
      // released, and a producer may reuse the slot.
      task.reset();
      // seq_cst pairs with the wake_at_ store in wait_completed (Dekker).
      completed_seq_.store(seq, std::memory_order_seq_cst);
      notify_waiters(seq);
    }
    if (busy_ != nullptr) busy_->end();
    done = available;
  }
}

void Stream::run_task(Task& task, std::uint64_t seq) {
  // Later tasks run even after a failure (Note [Asynchronous errors]).
  const TraceHook hook = trace_hook();
  const std::int64_t start = hook != nullptr ? steady_now_ns() : 0;
  if (hook != nullptr) exchange_running_task_block_dim(0);
  bool failed = false;
  RunningTaskOf running(this);
  try {
    task.run();
  } catch (...) {
    failed = true;
    record_error(task, seq, std::current_exception());
  }
  if (hook != nullptr) {
    TaskRecord record;
    record.info = task.info();
    record.device_index = device_index_;
    record.stream_index = stream_index_;
    record.seq = seq;
    record.start_ns = start;
    record.end_ns = steady_now_ns();
    record.failed = failed;
    record.block_dim = exchange_running_task_block_dim(0);
    hook(record);
  }
}

// Note [Wake a waiter once, when its task completes]
// A host thread that synchronizes behind a backlog of N tasks used to be
// woken after each of them, to find its task not done and sleep again: N
// futex wake-ups on the worker, and a host thread taking the second core
// each time (what this saved: benchmarks/README.md). Now a waiter publishes the task it
// waits for in wake_at_ and the worker wakes the waiters only when it
// completes that task (the earliest one, if several threads wait); a woken
// waiter whose task is not done yet publishes it again.
void Stream::notify_waiters(std::uint64_t completed) {
  if (completed >= wake_at_.load(std::memory_order_seq_cst)) {
    std::lock_guard<std::mutex> lock(done_mutex_);
    wake_at_.store(kNoWaiter, std::memory_order_relaxed);
    done_cv_.notify_all();
  }
}

void Stream::abort(const std::string& reason) {
  auto error = std::make_shared<AsyncError>();
  error->cause_code = ErrorCode::kAborted;
  error->task = "abort";
  error->cause = reason;
  error->device_index = device_index_;
  error->stream_index = stream_index_;
  error->seq = last_enqueued();
  adopt_error(std::move(error));
  aborted_.store(true, std::memory_order_release);
  // Wake blocked waiters under their mutex so none misses the flag.
  std::lock_guard<std::mutex> lock(done_mutex_);
  done_cv_.notify_all();
}

void Stream::throw_aborted(std::uint64_t seq) const {
  std::string reason = "aborted";
  if (std::shared_ptr<const AsyncError> error = pending_error()) reason = error->cause;
  throw Error(ErrorCode::kAborted, "NPU " + std::to_string(device_index_) + " stream " +
                                       std::to_string(stream_index_) + " was aborted while waiting for task " +
                                       std::to_string(seq) + ": " + reason);
}

void Stream::check_not_forked() const {
  if (fork_generation_ == g_fork_generation.load(std::memory_order_relaxed)) return;
  throw Error(ErrorCode::kBadFork,
              "NPU " + std::to_string(device_index_) + " stream " + std::to_string(stream_index_) +
                  " was created before fork(): its worker thread does not exist in this child "
                  "process");
}

void Stream::wait_completed(std::uint64_t seq) const {
  wait_completed_until(seq, std::chrono::steady_clock::time_point::max());
}

bool Stream::wait_completed_until(std::uint64_t seq,
                                  std::chrono::steady_clock::time_point deadline) const {
  check_not_forked();
  // Waiting for a task that was never enqueued would block forever.
  const std::uint64_t enqueued = enqueued_seq_.load(std::memory_order_acquire);
  if (seq > enqueued) {
    throw Error(ErrorCode::kInvalidValue,
                "cannot wait for task " + std::to_string(seq) + " on NPU " +
                    std::to_string(device_index_) + " stream " + std::to_string(stream_index_) +
                    ": only " + std::to_string(enqueued) + " tasks were enqueued");
  }
  auto completed = [&] { return completed_seq_.load(std::memory_order_seq_cst) >= seq; };
  auto done_or_aborted = [&] { return completed() || aborted_.load(std::memory_order_acquire); };
  if (spin_until(kHostSpinTime, done_or_aborted)) {
    if (!completed()) throw_aborted(seq);
    return true;
  }
  // Blocking: let the adaptor release what the worker might need (the GIL).
  HostWaitScope host_wait;
  bool done = true;
  {
    std::unique_lock<std::mutex> lock(done_mutex_);
    // Note [Wake a waiter once, when its task completes]. The wake_at_ store
    // comes before the check of completed_seq_, and the worker stores
    // completed_seq_ before it reads wake_at_, so one of the two sees the
    // other: either this thread sees its task done or the worker wakes it,
    // taking done_mutex_, which this thread holds until it waits.
    while (!done_or_aborted()) {
      if (seq < wake_at_.load(std::memory_order_relaxed)) wake_at_.store(seq, std::memory_order_seq_cst);
      if (done_or_aborted()) break;
      if (deadline == std::chrono::steady_clock::time_point::max()) {
        done_cv_.wait(lock);
      } else if (done_cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
        done = done_or_aborted();
        break;
      }
    }
  }
  if (done && !completed()) throw_aborted(seq);
  return done;
}

void Stream::begin_capture(std::shared_ptr<Graph> graph) {
  check_not_forked();
  std::lock_guard<std::mutex> lock(producer_mutex_);
  if (capture_) {
    throw Error(ErrorCode::kStreamCapture, "NPU " + std::to_string(device_index_) + " stream " +
                                               std::to_string(stream_index_) + " is already capturing a graph");
  }
  capture_ = std::move(graph);
  captured_tasks_ = 0;
  capturing_.store(true, std::memory_order_release);
}

std::shared_ptr<Graph> Stream::capture_graph() {
  std::lock_guard<std::mutex> lock(producer_mutex_);
  return capture_;
}

std::size_t Stream::captured_tasks() {
  std::lock_guard<std::mutex> lock(producer_mutex_);
  return captured_tasks_;
}

std::shared_ptr<Graph> Stream::end_capture() {
  std::lock_guard<std::mutex> lock(producer_mutex_);
  if (!capture_) {
    throw Error(ErrorCode::kStreamCapture, "NPU " + std::to_string(device_index_) + " stream " +
                                               std::to_string(stream_index_) + " is not capturing a graph");
  }
  capturing_.store(false, std::memory_order_release);
  return std::move(capture_);
}

void Stream::check_not_capturing(const char* what) const {
  if (!capturing_.load(std::memory_order_acquire)) return;
  throw Error(ErrorCode::kStreamCapture,
              std::string("operation not permitted when stream is capturing: ") + what + " on NPU " +
                  std::to_string(device_index_) + " stream " + std::to_string(stream_index_) +
                  ", which is capturing a graph (captured work has not run, so nothing can wait for "
                  "it or read its results until a replay)");
}

std::uint64_t Stream::enqueue_replay(std::shared_ptr<const Graph> graph) {
  return enqueue(TaskKind::kGraph, "graph_replay", [graph = std::move(graph)] { graph->run(); });
}

void Stream::wait_for(std::uint64_t seq) {
  check_not_capturing("a host wait");
  wait_completed(seq);
  if (!has_error_.load(std::memory_order_acquire)) return;
  // Another thread may have taken the error in the meantime; it reports it.
  std::shared_ptr<const AsyncError> error = take_error();
  if (error) throw KernelError(std::move(error), stream_index_);
}

std::shared_ptr<const AsyncError> Stream::pending_error() const {
  if (!has_error_.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lock(error_mutex_);
  return error_;
}

std::shared_ptr<const AsyncError> Stream::take_error() {
  std::lock_guard<std::mutex> lock(error_mutex_);
  aborted_.store(false, std::memory_order_release);  // the abort is reported with the error
  std::shared_ptr<const AsyncError> error = std::move(error_);
  error_.reset();
  has_error_.store(false, std::memory_order_release);
  return error;
}

void Stream::clear_error_if(const AsyncError* error) {
  std::lock_guard<std::mutex> lock(error_mutex_);
  if (error_.get() != error) return;
  error_.reset();
  has_error_.store(false, std::memory_order_release);
}

void Stream::adopt_error(std::shared_ptr<const AsyncError> error) {
  if (!error) return;
  std::lock_guard<std::mutex> lock(error_mutex_);
  // Keep the first error: later ones are usually consequences of it.
  if (error_) return;
  error_ = std::move(error);
  has_error_.store(true, std::memory_order_release);
}

void Stream::record_error(const Task& task, std::uint64_t seq, std::exception_ptr exception) {
  auto error = std::make_shared<AsyncError>();
  error->task = task.name() != nullptr ? task.name() : "task";
  error->device_index = device_index_;
  error->stream_index = stream_index_;
  error->seq = seq;
  try {
    std::rethrow_exception(exception);
  } catch (const KernelError& e) {
    // A task that re-raises another stream's error (a failed wait) passes
    // the original record on.
    adopt_error(e.shared());
    return;
  } catch (const Error& e) {
    error->cause_code = e.code();
    error->cause = e.what();
  } catch (const std::exception& e) {
    error->cause = e.what();
  } catch (...) {
    error->cause = "unknown exception";
  }
  adopt_error(std::move(error));
}

// ---------------------------------------------------------------- CallerGate

Stream* Stream::running_on_this_thread() { return t_running; }

struct Stream::CallerGate::State {
  std::mutex mutex;
  std::condition_variable cv;
  bool reached = false;  // the worker is at the gate: all earlier work is done
  bool open = false;     // the caller is done: the worker may go on
  int block_dim = 0;     // the threads the caller's work reported (trace.h), for the gate task's record
};

Stream::CallerGate::CallerGate(Stream& stream, const char* name)
    : state_(std::make_shared<State>()) {
  seq_ = stream.enqueue(TaskKind::kHost, name, [state = state_] {
    std::unique_lock<std::mutex> lock(state->mutex);
    state->reached = true;
    state->cv.notify_all();
    state->cv.wait(lock, [&] { return state->open; });
    set_running_task_block_dim(state->block_dim);
  });
  // Wait for the worker to reach the gate; blocking, so let the adaptor
  // release the GIL meanwhile (no runtime lock is held here).
  std::unique_lock<std::mutex> lock(state_->mutex);
  if (!state_->reached) {
    lock.unlock();
    HostWaitScope host_wait;
    lock.lock();
    state_->cv.wait(lock, [&] { return state_->reached; });
  }
  previous_running_ = t_running;
  t_running = &stream;
  previous_block_dim_ = exchange_running_task_block_dim(0);
}

Stream::CallerGate::~CallerGate() {
  t_running = previous_running_;
  const int block_dim = exchange_running_task_block_dim(previous_block_dim_);
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->block_dim = block_dim;
  state_->open = true;
  state_->cv.notify_all();
}

}  // namespace vnpu
