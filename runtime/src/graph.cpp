#include "vnpu/graph.h"

#include <exception>

namespace vnpu {

void Graph::append(const TaskInfo& info, const ErasedCallable& callable) {
  auto task = std::make_unique<Task>();
  task->emplace(info, callable);
  std::lock_guard<std::mutex> lock(mutex_);
  tasks_.push_back(std::move(task));
}

void Graph::run() const {
  std::exception_ptr first;
  for (const auto& task : tasks_) {
    try {
      task->run();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace vnpu
