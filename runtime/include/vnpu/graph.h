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
// Task groups (torch.npu.graph_task_group_begin/end, CANN's aclmdlRICapture-
// TaskGrpBegin/End): a run of consecutive captured tasks marked while the
// capture is underway, whose work can later be replaced as a whole
// (update_task_group) without recapturing the graph, e.g. an attention
// kernel captured with one step's sequence lengths and given the next step's.
// Groups do not nest; every task captured between begin and end belongs to
// the group, whichever of the capture's streams added it.
//
// Conditional nodes (CUDA graphs' if nodes; torch.cond captured in a graph):
// between begin_conditional(predicate) and end_conditional(), captured tasks
// go into a body of their own, which becomes one task of the graph (or of
// the enclosing body: conditionals nest); at each replay that task runs the
// body only when the predicate byte, device memory written by the tasks
// before it, is nonzero. Both branches of a torch.cond are captured, each
// under its own predicate (pred, then not pred), so one runs per replay.
//
// Thread-safety: append() may be called by several capturing streams at
// once. A finished graph's tasks are immutable except through
// update_task_group, which may run while the graph replays on another
// thread: each replay runs, per group, the version that was current when it
// reached the group's first task, and that version stays alive until it
// has run.
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
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

  // Conditional nodes (see above). end_conditional throws Error(kStreamCapture)
  // when none is open; a capture must close every one it opened.
  void begin_conditional(const unsigned char* predicate);
  void end_conditional();
  std::size_t open_conditionals() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return open_.size();
  }

  // Task groups (see above). begin_task_group throws Error(kStreamCapture)
  // while a group is open; end_task_group, when none is; end_task_group
  // returns the group's index in this graph.
  void begin_task_group();
  std::size_t end_task_group();
  std::size_t num_task_groups() const;

  // Whether a captured task waits for something the host does later (an
  // external event's record): the adaptor then counts a replay as work that
  // depends on the host. Set while capturing.
  void mark_waits_on_host() { waits_on_host_.store(true, std::memory_order_release); }
  bool waits_on_host() const { return waits_on_host_.load(std::memory_order_acquire); }
  // Replaces group `group`'s work by every task `replacement` holds (moved
  // out of it; `replacement` ends up empty). Throws Error(kInvalidValue) for
  // an unknown group, or when this graph is the replacement.
  void update_task_group(std::size_t group, Graph& replacement);

 private:
  using TaskList = std::vector<std::unique_ptr<Task>>;
  struct TaskGroup {
    std::size_t begin = 0, end = 0;       // [begin, end) in tasks_, the captured work
    std::shared_ptr<TaskList> update;     // the latest replacement, if any
  };
  static void run_tasks(const TaskList& tasks, std::size_t begin, std::size_t end, std::exception_ptr& first);

  struct OpenConditional {
    std::shared_ptr<Graph> body;
    const unsigned char* predicate;
  };

  mutable std::mutex mutex_;  // guards tasks_ while streams capture into it, groups_ and open_
  TaskList tasks_;
  std::vector<OpenConditional> open_;  // conditionals being captured, innermost last
  std::vector<TaskGroup> groups_;
  bool group_open_ = false;
  std::atomic<bool> waits_on_host_{false};
};

}  // namespace vnpu
