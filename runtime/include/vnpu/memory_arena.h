// MemoryArena: where a device's memory comes from.
//
// DeviceMemory accounts capacity and tracks blocks; the arena maps and
// unmaps the bytes. The default HostArena uses aligned host allocations.
// Other arenas plug in before a device's first allocation, e.g. one that
// maps memory shareable between processes, so that collectives of a host can
// read peers' buffers directly.
//
// Thread-safety: map/unmap may be called concurrently from any thread.
#pragma once

#include <cstddef>
#include <memory>

namespace vnpu {

class MemoryArena {
 public:
  virtual ~MemoryArena() = default;
  // `bytes` (> 0) aligned to `alignment`; nullptr when the arena is exhausted.
  virtual void* map(std::size_t bytes, std::size_t alignment) = 0;
  // Returns a block from map() with the same size.
  virtual void unmap(void* ptr, std::size_t bytes) = 0;
  virtual const char* name() const = 0;
};

// Aligned host memory (posix_memalign). The pages are touched only when
// used, so a large reservation costs nothing until written.
class HostArena final : public MemoryArena {
 public:
  void* map(std::size_t bytes, std::size_t alignment) override;
  void unmap(void* ptr, std::size_t bytes) override;
  const char* name() const override { return "host"; }
};

std::shared_ptr<MemoryArena> host_arena();

}  // namespace vnpu
