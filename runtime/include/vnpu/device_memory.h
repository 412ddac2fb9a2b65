// Device memory of one virtual NPU: blocks mapped by a MemoryArena (host RAM
// by default), aligned, with the device's capacity enforced.
//
// This is the stand-in for aclrtMalloc/aclrtFree. It does no caching; the
// caching allocator in csrc/ sits on top and calls it for whole segments.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "vnpu/memory_arena.h"

namespace vnpu {

class DeviceMemory {
 public:
  // Every block starts on this boundary (matches the 512-byte alignment that
  // real NPU allocations have, and is enough for any vectorised CPU kernel).
  static constexpr std::size_t kAlignmentBytes = 512;

  DeviceMemory(int device_index, std::uint64_t capacity_bytes);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // Reserves `bytes` of device memory. Throws Error(kOutOfMemory) when the
  // reservation would exceed capacity. bytes == 0 returns nullptr.
  void* allocate(std::size_t bytes);

  // Returns a block obtained from allocate(). nullptr is ignored.
  // Throws Error(kInvalidValue) for a pointer this device did not hand out.
  void release(void* ptr);

  // True when ptr lies inside a live block of this device.
  bool owns(const void* ptr) const;

  int device_index() const { return device_index_; }
  std::uint64_t capacity() const { return capacity_.load(); }
  std::uint64_t reserved() const { return reserved_.load(); }
  std::uint64_t free_bytes() const;

  // Changes the capacity (VNPU_DEVICE_MEMORY_MB, tests). Never below zero;
  // blocks already reserved stay valid even if they now exceed it.
  void set_capacity(std::uint64_t bytes) { capacity_.store(bytes); }

  // Where blocks come from (memory_arena.h). Throws Error(kInvalidValue)
  // while blocks of the current arena are live: set it before first use.
  void set_arena(std::shared_ptr<MemoryArena> arena);
  std::shared_ptr<MemoryArena> arena() const;

 private:
  const int device_index_;
  std::atomic<std::uint64_t> capacity_;
  std::atomic<std::uint64_t> reserved_{0};
  mutable std::mutex mutex_;
  std::shared_ptr<MemoryArena> arena_;            // guarded by mutex_
  std::map<std::uintptr_t, std::size_t> blocks_;  // start address -> size, guarded by mutex_
};

}  // namespace vnpu
