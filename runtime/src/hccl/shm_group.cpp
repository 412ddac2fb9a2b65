#include "vnpu/hccl/shm_group.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
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

// Whether process `pid` has ended: gone, or a zombie its parent has not
// reaped yet (kill() still finds those).
bool process_ended(uint64_t pid) {
  if (pid == 0) return false;  // not known yet
  if (kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%llu/stat", static_cast<unsigned long long>(pid));
  FILE* stat = std::fopen(path, "r");
  if (stat == nullptr) return false;
  char line[512];
  const size_t n = std::fread(line, 1, sizeof(line) - 1, stat);
  std::fclose(stat);
  line[n] = '\0';
  const char* end_of_name = std::strrchr(line, ')');  // "pid (comm) S ..."
  return end_of_name != nullptr && end_of_name[1] == ' ' && (end_of_name[2] == 'Z' || end_of_name[2] == 'X');
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
  auto mapping = std::make_unique<PeerMapping>(address, segment_bytes(ranks, slot_bytes));
  char* base = mapping->base();
  ShmGroup group(rank, ranks, slot_bytes, /*fd=*/-1, std::stoi(address.substr(0, address.find(':'))), base,
                 mapping->size());
  group.mapping_ = std::move(mapping);
  return group;
}

ShmGroup::ShmGroup(int rank, int ranks, size_t slot_bytes, int fd, int owner_pid, void* base, size_t size)
    : rank_(rank),
      ranks_(ranks),
      slot_bytes_(slot_bytes),
      fd_(fd),
      owner_pid_(owner_pid),
      base_(static_cast<char*>(base)),
      size_(size) {
  progress(rank_).pid.store(static_cast<uint64_t>(getpid()), std::memory_order_release);
}

ShmGroup::ShmGroup(ShmGroup&& other) noexcept
    : rank_(other.rank_),
      ranks_(other.ranks_),
      slot_bytes_(other.slot_bytes_),
      fd_(other.fd_),
      owner_pid_(other.owner_pid_),
      base_(other.base_),
      size_(other.size_),
      mapping_(std::move(other.mapping_)),
      steps_(other.steps_),
      chunks_(other.chunks_),
      arena_(std::move(other.arena_)),
      peers_(std::move(other.peers_)),
      zero_copy_(other.zero_copy_) {
  other.fd_ = -1;
  other.base_ = nullptr;
}

ShmGroup::~ShmGroup() {
  if (mapping_) return;  // an attached rank: the mapping unmaps itself
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

bool ShmGroup::meet_peers(std::chrono::microseconds patience) {
  const uint64_t next = steps_ + 1;
  progress(rank_).reached.store(next, std::memory_order_release);
  const auto give_up = std::chrono::steady_clock::now() + patience;
  for (uint64_t tries = 0;; ++tries) {
    bool all = true;
    for (int r = 0; r < ranks_ && all; ++r) {
      const Counter& peer = progress(r);
      all = peer.reached.load(std::memory_order_acquire) >= next || peer.value.load(std::memory_order_acquire) >= next;
    }
    if (all) return true;
    if (tries % 16 == 15) {
      if (std::chrono::steady_clock::now() > give_up) return false;
      sched_yield();
    }
  }
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
      // Every ~10 ms of sleeping: is the peer's process still there?
      if (tries % 256 == 0) {
        const uint64_t pid = progress(r).pid.load(std::memory_order_relaxed);
        if (process_ended(pid)) {
          throw ShmPeerExited("EI0002: remote rank " + std::to_string(r) + " (pid " + std::to_string(pid) +
                              ") exited before it reached step " + std::to_string(steps_) +
                              " of the group's collectives, so this collective cannot complete. Find out why that "
                              "rank ended (its own output), and make every rank issue the same collectives.");
        }
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

void ShmGroup::barrier(Deadline deadline) { step(deadline); }

bool ShmGroup::share_memory(std::shared_ptr<SharedArena> own, Deadline deadline) {
  Counter& mine = progress(rank_);
  if (own) {
    mine.arena_pid.store(static_cast<uint64_t>(getpid()), std::memory_order_relaxed);
    mine.arena_fd.store(static_cast<uint64_t>(own->fd()), std::memory_order_relaxed);
    mine.arena_size.store(own->size(), std::memory_order_relaxed);
  } else {
    mine.arena_pid.store(0, std::memory_order_relaxed);
  }
  step(deadline);
  std::vector<std::unique_ptr<PeerMapping>> peers(ranks_);
  bool mapped_all = own != nullptr;
  for (int r = 0; r < ranks_ && mapped_all; ++r) {
    if (r == rank_) continue;
    const Counter& theirs = progress(r);
    const uint64_t pid = theirs.arena_pid.load(std::memory_order_relaxed);
    if (pid == 0) {
      mapped_all = false;
      break;
    }
    try {
      peers[r] = std::make_unique<PeerMapping>(
          std::to_string(pid) + ":" + std::to_string(theirs.arena_fd.load(std::memory_order_relaxed)),
          theirs.arena_size.load(std::memory_order_relaxed));
    } catch (const std::exception&) {
      mapped_all = false;
    }
  }
  mine.mapped_all.store(mapped_all ? 1 : 0, std::memory_order_relaxed);
  step(deadline);
  bool everyone = true;
  for (int r = 0; r < ranks_; ++r) everyone = everyone && progress(r).mapped_all.load(std::memory_order_relaxed) == 1;
  if (everyone) {
    arena_ = std::move(own);
    peers_ = std::move(peers);
  }
  zero_copy_ = everyone;
  return everyone;
}

bool ShmGroup::post_buffers(const void* in, size_t in_bytes, const void* out, size_t out_bytes,
                            Deadline deadline) {
  const bool out_inside = out == nullptr || arena_->offset_of(out, out_bytes) != SharedArena::kNotInside;
  // A buffer outside the arena posts kNotInside: every rank then takes the slots.
  progress(rank_).offset_in.store(out_inside ? arena_->offset_of(in, in_bytes) : SharedArena::kNotInside,
                                  std::memory_order_relaxed);
  step(deadline);  // publishes (release) and sees every rank's offsets (acquire)
  for (int r = 0; r < ranks_; ++r) {
    if (progress(r).offset_in.load(std::memory_order_relaxed) == SharedArena::kNotInside) return false;
  }
  own_in_ = static_cast<char*>(const_cast<void*>(in));
  return true;
}

char* ShmGroup::peer_in(int r) const {
  if (r == rank_) return own_in_;
  return peers_[r]->base() + progress(r).offset_in.load(std::memory_order_relaxed);
}

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
