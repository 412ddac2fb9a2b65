#include "vnpu/device_memory.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "vnpu/error.h"

namespace vnpu {
namespace {

std::string pointer_text(const void* ptr) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", ptr);
  return buf;
}

}  // namespace

DeviceMemory::DeviceMemory(int device_index, std::uint64_t capacity_bytes)
    : device_index_(device_index), capacity_(capacity_bytes), arena_(host_arena()) {}

DeviceMemory::~DeviceMemory() {
  // Blocks still live here were leaked by the caller; give the host memory
  // back anyway (the device is going away, nothing can use them any more).
  for (const auto& block : blocks_) arena_->unmap(reinterpret_cast<void*>(block.first), block.second);
}

void DeviceMemory::set_arena(std::shared_ptr<MemoryArena> arena) {
  if (!arena) throw Error(ErrorCode::kInvalidValue, "DeviceMemory::set_arena: no arena given");
  std::lock_guard<std::mutex> lock(mutex_);
  if (!blocks_.empty()) {
    throw Error(ErrorCode::kInvalidValue,
                "virtual NPU " + std::to_string(device_index_) + ": cannot change the memory arena to '" +
                    arena->name() + "' while " + std::to_string(blocks_.size()) +
                    " blocks of the current one are live");
  }
  arena_ = std::move(arena);
}

std::shared_ptr<MemoryArena> DeviceMemory::arena() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return arena_;
}

void* DeviceMemory::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;

  const std::string prefix = "virtual NPU " + std::to_string(device_index_) + " out of memory: ";
  constexpr std::size_t kMask = kAlignmentBytes - 1;
  if (bytes > std::numeric_limits<std::size_t>::max() - kMask) {
    throw Error(ErrorCode::kOutOfMemory,
                prefix + "tried to reserve " + std::to_string(bytes) + " bytes, more than the address space");
  }
  // Round up so that the reservation covers the whole aligned block.
  const std::size_t size = (bytes + kMask) & ~kMask;

  // Reserve first, allocate second: the compare-exchange makes "check room,
  // then take it" one atomic step, so concurrent allocations can never push
  // the reservation beyond capacity.
  std::uint64_t reserved = reserved_.load();
  for (;;) {
    const std::uint64_t capacity = capacity_.load();
    if (size > capacity || reserved > capacity - size) {
      throw Error(ErrorCode::kOutOfMemory,
                  prefix + "tried to reserve " + std::to_string(size) + " bytes, " +
                      std::to_string(reserved) + " of " + std::to_string(capacity) +
                      " bytes already reserved");
    }
    if (reserved_.compare_exchange_weak(reserved, reserved + size)) break;
    // `reserved` now holds the current value; re-check against it.
  }

  // Mapped under the lock: the arena cannot change between map and record.
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = arena_->map(size, kAlignmentBytes);
  if (ptr == nullptr) {
    reserved_.fetch_sub(size);
    throw Error(ErrorCode::kOutOfMemory, prefix + std::string(arena_->name()) + " arena could not map " +
                                             std::to_string(size) + " bytes");
  }
  try {
    blocks_.emplace(reinterpret_cast<std::uintptr_t>(ptr), size);
  } catch (...) {
    arena_->unmap(ptr, size);
    reserved_.fetch_sub(size);
    throw;
  }
  return ptr;
}

void DeviceMemory::release(void* ptr) {
  if (ptr == nullptr) return;
  std::size_t size = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == blocks_.end()) {
      throw Error(ErrorCode::kInvalidValue,
                  "virtual NPU " + std::to_string(device_index_) + ": cannot free pointer " +
                      pointer_text(ptr) + ", it is not the start of a block allocated on this device");
    }
    size = it->second;
    blocks_.erase(it);
    arena_->unmap(ptr, size);
  }
  reserved_.fetch_sub(size);
}

bool DeviceMemory::owns(const void* ptr) const {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  // The candidate is the last block starting at or before addr.
  auto it = blocks_.upper_bound(addr);
  if (it == blocks_.begin()) return false;
  --it;
  return addr - it->first < it->second;
}

std::uint64_t DeviceMemory::free_bytes() const {
  const std::uint64_t capacity = capacity_.load();
  const std::uint64_t reserved = reserved_.load();
  return reserved >= capacity ? 0 : capacity - reserved;
}

}  // namespace vnpu
