#include "vnpu/shared_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <stdexcept>

namespace vnpu {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("vNPU shared memory: " + what + ": " + std::strerror(errno));
}

std::size_t round_up(std::size_t value, std::size_t to) { return (value + to - 1) / to * to; }

}  // namespace

SharedArena::SharedArena(std::size_t reserve_bytes) : size_(round_up(reserve_bytes, kPageBytes)) {
  fd_ = memfd_create("vnpu-device-memory", MFD_CLOEXEC);
  if (fd_ < 0) fail("memfd_create");
  // Sparse: the file has its size, but no page until one is written.
  if (ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
    close(fd_);
    fail("ftruncate");
  }
  void* base = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
  if (base == MAP_FAILED) {
    close(fd_);
    fail("mmap");
  }
  base_ = static_cast<char*>(base);
  free_.emplace(0, size_);
}

SharedArena::~SharedArena() {
  munmap(base_, size_);
  close(fd_);
}

void* SharedArena::map(std::size_t bytes, std::size_t alignment) {
  if (bytes == 0 || alignment > kPageBytes) return nullptr;
  const std::size_t size = round_up(bytes, kPageBytes);
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const std::size_t offset = it->first;
    const std::size_t rest = it->second - size;
    free_.erase(it);
    if (rest > 0) free_.emplace(offset + size, rest);
    return base_ + offset;
  }
  return nullptr;
}

void SharedArena::unmap(void* ptr, std::size_t bytes) {
  if (ptr == nullptr) return;
  std::size_t offset = static_cast<std::size_t>(static_cast<char*>(ptr) - base_);
  std::size_t size = round_up(bytes, kPageBytes);
  // Give the pages back; the range reads as zeros if it is handed out again.
  fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
            static_cast<off_t>(size));
  std::lock_guard<std::mutex> lock(mutex_);
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_.emplace(offset, size);
}

std::string SharedArena::address() const {
  return std::to_string(getpid()) + ":" + std::to_string(fd_);
}

std::uint64_t SharedArena::offset_of(const void* ptr, std::size_t bytes) const {
  const char* p = static_cast<const char*>(ptr);
  if (p < base_ || p > base_ + size_ || bytes > static_cast<std::size_t>(base_ + size_ - p)) return kNotInside;
  return static_cast<std::uint64_t>(p - base_);
}

namespace {
std::mutex g_arena_mutex;
std::shared_ptr<SharedArena> g_arena;  // guarded by g_arena_mutex
}  // namespace

std::shared_ptr<SharedArena> shared_arena() {
  std::lock_guard<std::mutex> lock(g_arena_mutex);
  if (!g_arena) g_arena = std::make_shared<SharedArena>();
  return g_arena;
}

std::shared_ptr<SharedArena> existing_shared_arena() {
  std::lock_guard<std::mutex> lock(g_arena_mutex);
  return g_arena;
}

PeerMapping::PeerMapping(const std::string& address, std::size_t bytes) : size_(bytes) {
  const auto colon = address.find(':');
  if (colon == std::string::npos) throw std::invalid_argument("vNPU shared memory: bad address " + address);
  const std::string path = "/proc/" + address.substr(0, colon) + "/fd/" + address.substr(colon + 1);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fail("open " + path + " (is the process that made it alive, and run by the same user?)");
  void* base = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  close(fd);  // the mapping keeps the file
  if (base == MAP_FAILED) fail("mmap " + path);
  base_ = static_cast<char*>(base);
}

PeerMapping::~PeerMapping() { munmap(base_, size_); }

}  // namespace vnpu
