// ErasedCallable: a callable described by plain functions, and the size a
// stream's queue slot holds inline.
//
// Apart from task.h so that code which only hands callables to a stream
// (csrc/launch/launch.h, included by every kernel) does not depend on the
// Task and trace headers: editing those then rebuilds a few files, not every
// kernel.
#pragma once

#include <cstddef>
#include <new>
#include <utility>

namespace vnpu {

// Big enough for the adaptor's kernel tasks (their captured tensor
// snapshots and outputs; launch.h checks it at compile time), so a launch
// never allocates. The ring of 4096 slots is then about 4 MiB per stream.
constexpr std::size_t kTaskInlineBytes = 1024;

// A callable described by plain functions, so that code which cannot see
// the callable's type (or this header's templates, to keep its includes
// narrow) can move it into a queue slot. `object` is moved from.
struct ErasedCallable {
  void* object = nullptr;
  std::size_t size = 0;
  std::size_t align = 0;
  void (*move_into)(void* destination, void* source) = nullptr;  // placement move
  void (*run)(void* object) = nullptr;
  void (*destroy)(void* object) = nullptr;
};

// Describes `object` (which must outlive the ErasedCallable's use).
template <typename T>
ErasedCallable erase(T& object) {
  ErasedCallable c;
  c.object = &object;
  c.size = sizeof(T);
  c.align = alignof(T);
  c.move_into = [](void* destination, void* source) { new (destination) T(std::move(*static_cast<T*>(source))); };
  c.run = [](void* p) { (*static_cast<T*>(p))(); };
  c.destroy = [](void* p) { static_cast<T*>(p)->~T(); };
  return c;
}

}  // namespace vnpu
