#include "vnpu/hccl/shm_group.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

namespace vnpu::hccl {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("hccl shared memory: " + what + ": " + std::strerror(errno));
}

void check_ranks(int rank, int ranks) {
  if (ranks < 1 || ranks > ShmGroup::kMaxRanks || rank < 0 || rank >= ranks) {
    throw std::invalid_argument("hccl shared memory: rank " + std::to_string(rank) + " of " +
                                std::to_string(ranks) + " (at most " + std::to_string(ShmGroup::kMaxRanks) +
                                " ranks)");
  }
}

void* map(int fd, size_t size) {
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) fail("mmap");
  return base;
}

}  // namespace

size_t ShmGroup::segment_bytes(int ranks, size_t slot_bytes) {
  return sizeof(Counter) * kMaxRanks + (2 * static_cast<size_t>(ranks) + 2) * slot_bytes;
}

ShmGroup ShmGroup::create(int ranks, size_t slot_bytes) {
  check_ranks(0, ranks);
  if (slot_bytes == 0 || slot_bytes % 64 != 0) throw std::invalid_argument("hccl shared memory: bad slot size");
  const int fd = memfd_create("vnpu-hccl", MFD_CLOEXEC);
  if (fd < 0) fail("memfd_create");
  const size_t size = segment_bytes(ranks, slot_bytes);
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    fail("ftruncate");
  }
  return ShmGroup(0, ranks, slot_bytes, fd, static_cast<int>(getpid()), map(fd, size), size);
}

ShmGroup ShmGroup::attach(int rank, int ranks, size_t slot_bytes, const std::string& address) {
  check_ranks(rank, ranks);
  const auto colon = address.find(':');
  if (colon == std::string::npos) throw std::invalid_argument("hccl shared memory: bad address " + address);
  const std::string path = "/proc/" + address.substr(0, colon) + "/fd/" + address.substr(colon + 1);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fail("open " + path + " (is rank 0 alive, and run by the same user?)");
  const size_t size = segment_bytes(ranks, slot_bytes);
  void* base = nullptr;
  try {
    base = map(fd, size);
  } catch (...) {
    close(fd);
    throw;
  }
  return ShmGroup(rank, ranks, slot_bytes, fd, std::stoi(address.substr(0, colon)), base, size);
}

ShmGroup::ShmGroup(int rank, int ranks, size_t slot_bytes, int fd, int owner_pid, void* base, size_t size)
    : rank_(rank),
      ranks_(ranks),
      slot_bytes_(slot_bytes),
      fd_(fd),
      owner_pid_(owner_pid),
      base_(static_cast<char*>(base)),
      size_(size) {}

ShmGroup::ShmGroup(ShmGroup&& other) noexcept
    : rank_(other.rank_),
      ranks_(other.ranks_),
      slot_bytes_(other.slot_bytes_),
      fd_(other.fd_),
      owner_pid_(other.owner_pid_),
      base_(other.base_),
      size_(other.size_),
      steps_(other.steps_),
      chunks_(other.chunks_) {
  other.fd_ = -1;
  other.base_ = nullptr;
}

ShmGroup::~ShmGroup() {
  if (base_ != nullptr) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

std::string ShmGroup::address() const { return std::to_string(owner_pid_) + ":" + std::to_string(fd_); }

ShmGroup::Counter& ShmGroup::progress(int rank) const {
  return reinterpret_cast<Counter*>(base_)[rank];
}

char* ShmGroup::slot(int rank, uint64_t chunk) const {
  const size_t index = static_cast<size_t>(chunk % 2) * ranks_ + rank;
  return base_ + sizeof(Counter) * kMaxRanks + index * slot_bytes_;
}

char* ShmGroup::result(uint64_t chunk) const {
  return base_ + sizeof(Counter) * kMaxRanks + (2 * static_cast<size_t>(ranks_) + chunk % 2) * slot_bytes_;
}

void ShmGroup::step(Deadline deadline) {
  ++steps_;
  progress(rank_).value.store(steps_, std::memory_order_release);
  for (int r = 0; r < ranks_; ++r) {
    // Spin a little (a peer is usually close), then yield the core (ranks
    // may outnumber cores), then sleep, watching the deadline.
    for (uint64_t tries = 0; progress(r).value.load(std::memory_order_acquire) < steps_; ++tries) {
      if (tries < 64) continue;
      if (tries < 2048) {
        sched_yield();
        continue;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        throw ShmTimeout("hccl shared memory: Timed out waiting for rank " + std::to_string(r) +
                         " (step " + std::to_string(steps_) + ")");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void ShmGroup::share(size_t bytes, size_t elem, int rank, size_t* begin, size_t* end) const {
  const size_t elements = bytes / elem;
  *begin = elements * rank / ranks_ * elem;
  *end = elements * (rank + 1) / ranks_ * elem;
}

void ShmGroup::allreduce(void* data, size_t bytes, size_t elem, const ReduceFn& reduce, Deadline deadline) {
  char* bytes_in = static_cast<char*>(data);
  std::vector<const void*> sources(ranks_);
  const size_t chunk_max = slot_bytes_ / elem * elem;
  for (size_t offset = 0; offset < bytes; offset += chunk_max) {
    const size_t chunk = std::min(chunk_max, bytes - offset);
    const uint64_t c = chunks_++;
    std::memcpy(slot(rank_, c), bytes_in + offset, chunk);
    step(deadline);
    size_t begin = 0, end = 0;
    share(chunk, elem, rank_, &begin, &end);
    if (end > begin) {
      for (int r = 0; r < ranks_; ++r) sources[r] = slot(r, c) + begin;
      reduce(result(c) + begin, sources.data(), ranks_, end - begin);
    }
    step(deadline);
    std::memcpy(bytes_in + offset, result(c), chunk);
  }
}

void ShmGroup::broadcast(void* data, size_t bytes, int root, Deadline deadline) {
  char* bytes_io = static_cast<char*>(data);
  for (size_t offset = 0; offset < bytes; offset += slot_bytes_) {
    const size_t chunk = std::min(slot_bytes_, bytes - offset);
    const uint64_t c = chunks_++;
    if (rank_ == root) std::memcpy(result(c), bytes_io + offset, chunk);
    step(deadline);
    if (rank_ != root) std::memcpy(bytes_io + offset, result(c), chunk);
  }
}

void ShmGroup::allgather(const void* in, size_t bytes, void* out, Deadline deadline) {
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  for (size_t offset = 0; offset < bytes; offset += slot_bytes_) {
    const size_t chunk = std::min(slot_bytes_, bytes - offset);
    const uint64_t c = chunks_++;
    std::memcpy(slot(rank_, c), src + offset, chunk);
    step(deadline);
    for (int r = 0; r < ranks_; ++r) std::memcpy(dst + r * bytes + offset, slot(r, c), chunk);
  }
}

void ShmGroup::reduce_scatter(const void* in, size_t bytes, void* out, size_t elem, const ReduceFn& reduce,
                              Deadline deadline) {
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  std::vector<const void*> sources(ranks_);
  // Each step carries a piece of every rank's block: the slot holds ranks of them.
  const size_t piece_max = std::max<size_t>(slot_bytes_ / ranks_ / elem, 1) * elem;
  for (size_t offset = 0; offset < bytes; offset += piece_max) {
    const size_t piece = std::min(piece_max, bytes - offset);
    const uint64_t c = chunks_++;
    for (int r = 0; r < ranks_; ++r) std::memcpy(slot(rank_, c) + r * piece, src + r * bytes + offset, piece);
    step(deadline);
    for (int r = 0; r < ranks_; ++r) sources[r] = slot(r, c) + rank_ * piece;
    reduce(dst + offset, sources.data(), ranks_, piece);
  }
}

void ShmGroup::barrier(Deadline deadline) { step(deadline); }

int ShmGroup::compare_signatures(uint64_t signature, uint64_t* theirs, Deadline deadline) {
  progress(rank_).signature.store(signature, std::memory_order_relaxed);
  step(deadline);  // publishes the signature (release) and sees everyone's (acquire)
  // If any two ranks differ, every rank differs from one of them: all see it.
  int differs = -1;
  for (int r = 0; r < ranks_ && differs < 0; ++r) {
    const uint64_t other = progress(r).signature.load(std::memory_order_relaxed);
    if (other != signature) {
      differs = r;
      *theirs = other;
    }
  }
  // Nobody may post the next signature before everyone compared this one.
  step(deadline);
  return differs;
}

}  // namespace vnpu::hccl
