#include "vnpu/graph.h"

#include <exception>
#include <string>
#include <utility>

#include "vnpu/erased_callable.h"
#include "vnpu/error.h"

namespace vnpu {

void Graph::append(const TaskInfo& info, const ErasedCallable& callable) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!open_.empty()) {
    // Into the innermost conditional's body (its own lock; a body never locks its parent).
    std::shared_ptr<Graph> body = open_.back().body;
    lock.unlock();
    body->append(info, callable);
    return;
  }
  lock.unlock();
  auto task = std::make_unique<Task>();
  task->emplace(info, callable);
  lock.lock();
  tasks_.push_back(std::move(task));
}

namespace {

// The task a closed conditional becomes: its body, when the predicate holds.
struct ConditionalNode {
  std::shared_ptr<Graph> body;
  const unsigned char* predicate;
  void operator()() {
    if (*predicate != 0) body->run();
  }
};

}  // namespace

void Graph::begin_conditional(const unsigned char* predicate) {
  std::lock_guard<std::mutex> lock(mutex_);
  open_.push_back(OpenConditional{std::make_shared<Graph>(), predicate});
}

void Graph::end_conditional() {
  OpenConditional closed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (open_.empty()) {
      throw Error(ErrorCode::kStreamCapture, "end_capture_to_conditional_node: no conditional node is being captured");
    }
    closed = std::move(open_.back());
    open_.pop_back();
  }
  ConditionalNode node{std::move(closed.body), closed.predicate};
  append(TaskInfo{"conditional_node", TaskKind::kGraph}, erase(node));
}

void Graph::run_tasks(const TaskList& tasks, std::size_t begin, std::size_t end, std::exception_ptr& first) {
  for (std::size_t i = begin; i < end; ++i) {
    try {
      tasks[i]->run();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
}

void Graph::run() const {
  std::exception_ptr first;
  // Groups are few and sorted by position: run the tasks up to a group, then
  // the group's version current at that moment (the tasks before it may be
  // what waits for its update); the copied pointer keeps a version an update
  // replaces meanwhile alive until this replay has run it.
  std::size_t next = 0;
  for (std::size_t g = 0;; ++g) {
    std::size_t begin, end;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (g == groups_.size()) break;
      begin = groups_[g].begin;
      end = groups_[g].end;
    }
    run_tasks(tasks_, next, begin, first);
    std::shared_ptr<TaskList> update;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      update = groups_[g].update;
    }
    if (update) {
      run_tasks(*update, 0, update->size(), first);
    } else {
      run_tasks(tasks_, begin, end, first);
    }
    next = end;
  }
  run_tasks(tasks_, next, tasks_.size(), first);
  if (first) std::rethrow_exception(first);
}

void Graph::begin_task_group() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (group_open_) {
    throw Error(ErrorCode::kStreamCapture,
                "graph_task_group_begin: a task group is already open in this capture; call "
                "graph_task_group_end first (task groups do not nest).");
  }
  group_open_ = true;
  groups_.push_back(TaskGroup{tasks_.size(), tasks_.size(), nullptr});
}

std::size_t Graph::end_task_group() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!group_open_) {
    throw Error(ErrorCode::kStreamCapture,
                "graph_task_group_end: no task group is open in this capture; call graph_task_group_begin first.");
  }
  group_open_ = false;
  groups_.back().end = tasks_.size();
  return groups_.size() - 1;
}

std::size_t Graph::num_task_groups() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return groups_.size();
}

void Graph::update_task_group(std::size_t group, Graph& replacement) {
  if (&replacement == this) {
    throw Error(ErrorCode::kInvalidValue, "a graph's task group cannot be updated from the graph itself");
  }
  auto update = std::make_shared<TaskList>();
  {
    std::lock_guard<std::mutex> lock(replacement.mutex_);
    *update = std::move(replacement.tasks_);
    replacement.tasks_.clear();
  }
  std::shared_ptr<TaskList> previous;  // destroyed outside the lock
  std::lock_guard<std::mutex> lock(mutex_);
  if (group >= groups_.size() || (group_open_ && group + 1 == groups_.size())) {
    throw Error(ErrorCode::kInvalidValue, "task group " + std::to_string(group) +
                                              " does not exist in this graph (it has " +
                                              std::to_string(groups_.size()) + ")");
  }
  previous = std::move(groups_[group].update);
  groups_[group].update = std::move(update);
}

}  // namespace vnpu
