// SharedArena: device memory that other processes of the host can map.
//
// One anonymous memfd per process, reserved once (kReserveBytes of address
// space, sparse: pages exist only once written) and mapped MAP_SHARED. Blocks
// are carved from it first-fit; a returned block's pages are given back to
// the kernel (punched out of the file) so empty_cache() frees memory as the
// host arena does.
//
// Why: the hccl backend's shared-memory transport lets the ranks of one host
// read each other's device buffers directly (one pass over the peers'
// memory instead of copy-in / reduce / copy-out). A peer opens the memfd
// through /proc/<pid>/fd/<fd> (same user only), and maps it whole, so a
// buffer is named across processes by its offset in the arena.
//
// Enabled per process by VNPU_SHARED_DEVICE_MEMORY (environment.h); the
// runtime installs it on every device before their first allocation.
//
// Thread-safety: map/unmap/contains may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "vnpu/memory_arena.h"

namespace vnpu {

class SharedArena final : public MemoryArena {
 public:
  // Address space reserved per process (virtual only; 1 TiB).
  static constexpr std::size_t kReserveBytes = std::size_t{1} << 40;
  // Blocks start and end on pages, so freed ranges can be punched out.
  static constexpr std::size_t kPageBytes = 4096;

  // Throws std::runtime_error when memfd_create or mmap fails.
  explicit SharedArena(std::size_t reserve_bytes = kReserveBytes);
  ~SharedArena() override;
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  void* map(std::size_t bytes, std::size_t alignment) override;
  void unmap(void* ptr, std::size_t bytes) override;
  const char* name() const override { return "shared"; }

  // "<pid>:<fd>": how a peer process opens the arena (PeerMapping).
  std::string address() const;
  int fd() const { return fd_; }
  std::size_t size() const { return size_; }
  char* base() const { return base_; }
  // Offset of [ptr, ptr + bytes) inside the arena, or kNotInside.
  static constexpr std::uint64_t kNotInside = ~std::uint64_t{0};
  std::uint64_t offset_of(const void* ptr, std::size_t bytes) const;

 private:
  int fd_ = -1;
  char* base_ = nullptr;
  std::size_t size_ = 0;
  std::mutex mutex_;
  std::map<std::size_t, std::size_t> free_;  // offset -> bytes, coalesced; guarded by mutex_
};

// The process's shared arena, made on first call (throws if it cannot be).
std::shared_ptr<SharedArena> shared_arena();
// The process's shared arena if shared_arena() made it, else nullptr.
std::shared_ptr<SharedArena> existing_shared_arena();

// Another process's memfd (a SharedArena, an hccl segment) mapped into this
// process (read and write), by its "<pid>:<fd>" address.
class PeerMapping {
 public:
  // Throws std::runtime_error naming the path when the peer cannot be opened.
  PeerMapping(const std::string& address, std::size_t bytes);
  ~PeerMapping();
  PeerMapping(const PeerMapping&) = delete;
  PeerMapping& operator=(const PeerMapping&) = delete;

  char* base() const { return base_; }
  std::size_t size() const { return size_; }

 private:
  char* base_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace vnpu
