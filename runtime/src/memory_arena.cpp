#include "vnpu/memory_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

namespace vnpu {

void* HostArena::map(std::size_t bytes, std::size_t alignment) {
  if (bytes >= kReserveOnlyBytes) {
    // Mappings start on a page; DeviceMemory asks for 512 bytes.
    if (alignment > static_cast<std::size_t>(sysconf(_SC_PAGESIZE))) return nullptr;
    void* ptr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return ptr == MAP_FAILED ? nullptr : ptr;
  }
  void* ptr = nullptr;
  return posix_memalign(&ptr, alignment, bytes) == 0 ? ptr : nullptr;
}

void HostArena::unmap(void* ptr, std::size_t bytes) {
  if (bytes >= kReserveOnlyBytes) {  // map() chose by the same size
    munmap(ptr, bytes);
    return;
  }
  std::free(ptr);
}

std::shared_ptr<MemoryArena> host_arena() {
  static const std::shared_ptr<MemoryArena> arena = std::make_shared<HostArena>();
  return arena;
}

}  // namespace vnpu
