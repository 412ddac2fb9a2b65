#include "vnpu/memory_arena.h"

#include <cstdlib>

namespace vnpu {

void* HostArena::map(std::size_t bytes, std::size_t alignment) {
  void* ptr = nullptr;
  return posix_memalign(&ptr, alignment, bytes) == 0 ? ptr : nullptr;
}

void HostArena::unmap(void* ptr, std::size_t /*bytes*/) { std::free(ptr); }

std::shared_ptr<MemoryArena> host_arena() {
  static const std::shared_ptr<MemoryArena> arena = std::make_shared<HostArena>();
  return arena;
}

}  // namespace vnpu
