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

#include "vnpu/erased_callable.h"
#include "vnpu/trace.h"

namespace vnpu {

// Note [Slots on cache lines of their own]: a producer writes slot N+1
// while the worker finishes slot N (running it, then reset() clearing its
// header), so a slot starts on a cache line and its header (what reset()
// writes) comes first: with the header after the storage and a 1072-byte
// slot, slot N's header and slot N+1's first bytes shared a line, which
// then moved between the two cores on every launch.
class alignas(64) Task {
 public:
  static constexpr std::size_t kInlineBytes = kTaskInlineBytes;

  Task() = default;
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { reset(); }

  // Moves the callable described by `callable` into the slot (invoked later
  // as fn()). `info.name` must outlive the task: it is a string literal or an
  // interned op name, used in error messages.
  void emplace(const TaskInfo& info, const ErasedCallable& callable) {
    reset();
    info_ = info;
    if (callable.size <= kInlineBytes && callable.align <= alignof(std::max_align_t)) {
      callable.move_into(storage_, callable.object);
      run_ = callable.run;
      destroy_ = callable.destroy;
      return;
    }
    // Boxed: the slot holds the box and the callable's own functions.
    struct Box {
      void* object;
      std::size_t align;  // operator delete must get the alignment new got
      void (*run)(void*);
      void (*destroy)(void*);
    };
    void* object = ::operator new(callable.size, std::align_val_t(callable.align));
    callable.move_into(object, callable.object);
    new (storage_) Box{object, callable.align, callable.run, callable.destroy};
    run_ = [](void* p) {
      Box* box = static_cast<Box*>(p);
      box->run(box->object);
    };
    destroy_ = [](void* p) {
      Box* box = static_cast<Box*>(p);
      box->destroy(box->object);
      ::operator delete(box->object, std::align_val_t(box->align));
    };
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
  void (*run_)(void*) = nullptr;
  void (*destroy_)(void*) = nullptr;
  TaskInfo info_;
  alignas(std::max_align_t) unsigned char storage_[kInlineBytes];
};

}  // namespace vnpu
