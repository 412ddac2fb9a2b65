// Task: one unit of work in a stream's launch queue.
//
// A task is a type-erased callable stored inline in the queue slot, so
// enqueueing does no heap allocation for callables up to kInlineBytes.
// Larger callables are boxed on the heap (correct, just slower).
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include "vnpu/trace.h"

namespace vnpu {

class Task {
 public:
  static constexpr std::size_t kInlineBytes = 512;

  Task() = default;
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { reset(); }

  // Stores `fn` (invoked later as fn()). `info.name` must outlive the task:
  // it is a string literal or an interned op name, used in error messages.
  template <typename F>
  void emplace(const TaskInfo& info, F&& fn) {
    using Fn = std::decay_t<F>;
    reset();
    info_ = info;
    if constexpr (sizeof(Fn) <= kInlineBytes &&
                  alignof(Fn) <= alignof(std::max_align_t)) {
      new (storage_) Fn(std::forward<F>(fn));
      run_ = [](void* p) { (*static_cast<Fn*>(p))(); };
      destroy_ = [](void* p) { static_cast<Fn*>(p)->~Fn(); };
    } else {
      Fn* boxed = new Fn(std::forward<F>(fn));
      new (storage_) Fn*(boxed);
      run_ = [](void* p) { (**static_cast<Fn**>(p))(); };
      destroy_ = [](void* p) { delete *static_cast<Fn**>(p); };
    }
  }

  bool empty() const { return run_ == nullptr; }
  const char* name() const { return info_.name; }
  const TaskInfo& info() const { return info_; }

  // Runs the callable. Exceptions propagate to the caller (the stream).
  void run() { run_(storage_); }

  // Destroys the callable, releasing whatever it captured.
  void reset() {
    if (destroy_ != nullptr) destroy_(storage_);
    run_ = nullptr;
    destroy_ = nullptr;
    info_ = TaskInfo{};
  }

 private:
  alignas(std::max_align_t) unsigned char storage_[kInlineBytes];
  void (*run_)(void*) = nullptr;
  void (*destroy_)(void*) = nullptr;
  TaskInfo info_;
};

}  // namespace vnpu
