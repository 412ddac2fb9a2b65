#include "vnpu/stream.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <system_error>

#if defined(__linux__)
#include <pthread.h>
#endif

#include "vnpu/error.h"

namespace vnpu {
namespace {

// How long the worker and host waiters spin before they block. Short enough
// not to burn a core, long enough that a steady stream of small launches
// never pays for a futex round trip.
constexpr std::chrono::microseconds kSpinTime{30};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::this_thread::yield();
#endif
}

// Spins until `ready()` holds or kSpinTime has passed; returns ready().
template <typename Ready>
bool spin_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
    cpu_relax();
    // Reading the clock costs more than a pause; do it now and then.
    if (i % 64 == 0 && std::chrono::steady_clock::now() >= deadline) return ready();
  }
}

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

Stream::Stream(int device_index, int stream_index, int priority, bool synchronous)
    : device_index_(device_index),
      stream_index_(stream_index),
      priority_(priority),
      synchronous_(synchronous) {
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

Task& Stream::wait_for_free_slot(std::uint64_t seq) {
  // Slot seq % kCapacity was last used by task seq - kCapacity; the worker
  // resets a slot before it publishes that task's completion.
  if (seq > kCapacity) wait_completed(seq - kCapacity);
  return ring_[seq % kCapacity];
}

void Stream::publish(std::uint64_t seq) {
  // seq_cst store + seq_cst load of worker_sleeping_ pairs with the worker's
  // seq_cst store of worker_sleeping_ + load of enqueued_seq_ (Dekker): at
  // least one side sees the other, so a wake-up is never lost.
  enqueued_seq_.store(seq, std::memory_order_seq_cst);
  next_seq_ = seq + 1;
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
      stream->notify_waiters();
    }
  } complete{this, task, seq};
  task.run();
  return seq;
}

void Stream::worker_loop() {
  std::uint64_t done = 0;  // last sequence number this worker completed
  for (;;) {
    const std::uint64_t available = enqueued_seq_.load(std::memory_order_acquire);
    if (available == done) {
      if (spin_until([&] { return enqueued_seq_.load(std::memory_order_acquire) != done; })) {
        continue;
      }
      std::unique_lock<std::mutex> lock(wake_mutex_);
      worker_sleeping_.store(true, std::memory_order_seq_cst);
      wake_cv_.wait(lock, [&] {
        return stopping_.load() || enqueued_seq_.load(std::memory_order_seq_cst) != done;
      });
      worker_sleeping_.store(false, std::memory_order_relaxed);
      // The destructor drains before it sets stopping_, so nothing is left.
      if (stopping_.load() && enqueued_seq_.load() == done) return;
      continue;
    }

    for (std::uint64_t seq = done + 1; seq <= available; ++seq) {
      Task& task = ring_[seq % kCapacity];
      // After a failure, later tasks may read garbage: skip them until the
      // error has been reported, but still complete them.
      if (!has_error_.load(std::memory_order_acquire)) {
        try {
          task.run();
        } catch (const std::exception& e) {
          record_error(task.name(), e.what());
        } catch (...) {
          record_error(task.name(), "unknown exception");
        }
      }
      // Destroy the captures before completion is published: a waiter that
      // sees the task complete may rely on its captured resources being
      // released, and a producer may reuse the slot.
      task.reset();
      // seq_cst pairs with the waiters_ increment in wait_completed (Dekker).
      completed_seq_.store(seq, std::memory_order_seq_cst);
      notify_waiters();
    }
    done = available;
  }
}

void Stream::notify_waiters() {
  if (waiters_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(done_mutex_);
    done_cv_.notify_all();
  }
}

void Stream::wait_completed(std::uint64_t seq) const {
  // Waiting for a task that was never enqueued would block forever.
  const std::uint64_t enqueued = enqueued_seq_.load(std::memory_order_acquire);
  if (seq > enqueued) {
    throw Error(ErrorCode::kInvalidValue,
                "cannot wait for task " + std::to_string(seq) + " on NPU " +
                    std::to_string(device_index_) + " stream " + std::to_string(stream_index_) +
                    ": only " + std::to_string(enqueued) + " tasks were enqueued");
  }
  auto completed = [&] { return completed_seq_.load(std::memory_order_seq_cst) >= seq; };
  if (spin_until(completed)) return;
  // Announce the waiter before checking again under the mutex; the worker
  // stores completed_seq_ before it reads waiters_, so one of the two sees
  // the other.
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  {
    std::unique_lock<std::mutex> lock(done_mutex_);
    done_cv_.wait(lock, completed);
  }
  waiters_.fetch_sub(1, std::memory_order_seq_cst);
}

void Stream::wait_for(std::uint64_t seq) {
  wait_completed(seq);
  if (!has_error_.load(std::memory_order_acquire)) return;
  // Another thread may have taken the error in the meantime; it reports it.
  std::string message = take_error();
  if (!message.empty()) throw Error(ErrorCode::kKernelFailed, message);
}

std::string Stream::take_error() {
  std::lock_guard<std::mutex> lock(error_mutex_);
  if (!has_error_.load(std::memory_order_relaxed)) return "";
  std::string message = std::move(error_message_);
  error_message_.clear();
  has_error_.store(false, std::memory_order_release);
  return message;
}

void Stream::record_error(const char* task_name, const char* what) {
  std::lock_guard<std::mutex> lock(error_mutex_);
  // Keep the first error: later ones are usually consequences of it.
  if (has_error_.load(std::memory_order_relaxed)) return;
  error_message_ = std::string(task_name != nullptr ? task_name : "task") + " failed on NPU " +
                   std::to_string(device_index_) + ": " + (what != nullptr ? what : "");
  has_error_.store(true, std::memory_order_release);
}

}  // namespace vnpu
