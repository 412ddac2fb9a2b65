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
// used, so a large reservation costs nothing until written. Blocks of
// kReserveOnlyBytes or more are anonymous mappings with MAP_NORESERVE:
// Linux's default overcommit rule refuses a single ordinary allocation
// larger than RAM + swap, though its pages would be made only when touched.
// A device's capacity is the chip's HBM (64 GiB on a 910B2), often more than
// the host has: with this, half of it can be reserved as on the chip (real
// torch_npu's memory-fraction tests do), and only what is written takes RAM.
// Smaller blocks stay with malloc, which reuses freed pages without faults.
class HostArena final : public MemoryArena {
 public:
  static constexpr std::size_t kReserveOnlyBytes = std::size_t{1} << 30;  // 1 GiB

  void* map(std::size_t bytes, std::size_t alignment) override;
  void unmap(void* ptr, std::size_t bytes) override;
  const char* name() const override { return "host"; }
};

std::shared_ptr<MemoryArena> host_arena();

}  // namespace vnpu
