// Graph: the work a stream captured (NPU graphs, like CUDA graphs), replayed
// later as one task.
//
// Between Stream::begin_capture and end_capture, the stream's enqueue() moves
// each task into the graph instead of its queue: nothing runs. A replay
// enqueues a single task that runs the captured tasks in capture order, on
// the replaying stream's worker, with the arguments they were captured with
// (the same device addresses: the adaptor keeps capture-time memory in a
// private pool). Host cost of a replay is one enqueue, whatever the graph's
// size.
//
// While a stream captures, host waits on it (synchronize, wait_for, tasks
// run on the caller) throw Error(kStreamCapture): a captured task has not
// run, so waiting for it would wait for nothing (CUDA: "operation not
// permitted when stream is capturing").
//
// Errors: a captured task that throws during a replay does not stop the rest
// (Note [Asynchronous errors] in stream.h: the adaptor has poisoned its
// outputs); the replay task rethrows the first failure, which becomes the
// stream's pending error.
//
// Several streams may capture into one graph (a fork through events, see
// Event::record on a capturing stream): their tasks are kept in the order
// they were enqueued, which respects every dependency the host expressed, and
// a replay runs them in that order on one worker.
//
// Thread-safety: append() may be called by several capturing streams at
// once; a finished graph is immutable and may be replayed from any thread,
// also concurrently.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "vnpu/task.h"

namespace vnpu {

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Moves the callable into the graph (called by the capturing stream).
  void append(const TaskInfo& info, const ErasedCallable& callable);

  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return tasks_.size();
  }
  // The name of captured task `i` (debug dumps).
  const char* task_name(std::size_t i) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return tasks_[i]->name();
  }

  // Runs every captured task in order on the calling thread; see above for
  // errors.
  void run() const;

 private:
  mutable std::mutex mutex_;  // guards tasks_ while streams capture into it
  std::vector<std::unique_ptr<Task>> tasks_;
};

}  // namespace vnpu
