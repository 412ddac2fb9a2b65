// ShmGroup: the ranks of one host exchanging through shared memory.
//
// The torch-free transport of the hccl backend for ranks on one host: no
// sockets on the data path. Rank 0 makes an anonymous memfd segment (no name
// in /dev/shm, so nothing can be left behind by a crash, and only processes
// of the same user that are told its pid and fd can open it, through
// /proc/<pid>/fd/<fd>); every rank maps it. The segment holds, per rank, a
// cache-line of progress counters and two slots of `slot_bytes` (double
// buffering across chunks), and two shared result buffers.
//
// Every collective proceeds in chunks of at most slot_bytes: each rank
// copies its chunk into its slot and announces it; every rank then works on
// its 1/n share of the chunk (reducing across all slots into the result
// buffer, or copying), announces, and copies the whole result out. The
// arithmetic is the caller's (a ReduceFn), so dtypes and ops stay in the
// adaptor. Waits spin briefly, then yield and sleep, and give up at the
// deadline (throwing ShmTimeout) so a dead or stalled peer never hangs a rank.
//
// Thread-safety: one collective at a time per ShmGroup (the hccl backend runs
// them in order on one communication stream).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace vnpu::hccl {

// A peer did not arrive before the deadline.
class ShmTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ShmGroup {
 public:
  static constexpr int kMaxRanks = 64;

  // dst[i] = op(srcs[0][i], ..., srcs[count-1][i]) over `bytes` bytes (a
  // whole number of elements). dst may be one of srcs.
  using ReduceFn = std::function<void(void* dst, const void* const* srcs, int count, size_t bytes)>;
  using Deadline = std::chrono::steady_clock::time_point;

  // Rank 0: makes the segment and maps it. `address()` then names it for
  // the peers ("<pid>:<fd>").
  static ShmGroup create(int ranks, size_t slot_bytes);
  // Ranks 1..n-1: maps the segment rank 0 made.
  static ShmGroup attach(int rank, int ranks, size_t slot_bytes, const std::string& address);

  ShmGroup(ShmGroup&& other) noexcept;
  ShmGroup& operator=(ShmGroup&&) = delete;
  ~ShmGroup();

  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  std::string address() const;

  // `bytes` of `data` (element size `elem`) reduced across the ranks, in place.
  void allreduce(void* data, size_t bytes, size_t elem, const ReduceFn& reduce, Deadline deadline);
  // Root's `bytes` of `data` to every rank.
  void broadcast(void* data, size_t bytes, int root, Deadline deadline);
  // Every rank's `bytes` of `in`, rank after rank, into `out` (ranks * bytes).
  void allgather(const void* in, size_t bytes, void* out, Deadline deadline);
  // `in` holds ranks * `bytes`; rank r gets the reduction of every rank's r-th block.
  void reduce_scatter(const void* in, size_t bytes, void* out, size_t elem, const ReduceFn& reduce,
                      Deadline deadline);
  void barrier(Deadline deadline);

  // Desync check (TORCH_HCCL_DESYNC_DEBUG): every rank posts what it is
  // about to run (`signature`: any 64-bit description, equal on all ranks
  // when they agree); returns the first rank whose signature differs from
  // this rank's and writes it to *theirs, or -1 if all agree (then every
  // rank gets -1; if any two differ, every rank gets a rank).
  int compare_signatures(uint64_t signature, uint64_t* theirs, Deadline deadline);

 private:
  struct alignas(64) Counter {
    std::atomic<uint64_t> value;
    std::atomic<uint64_t> signature;  // compare_signatures
  };
  ShmGroup(int rank, int ranks, size_t slot_bytes, int fd, int owner_pid, void* base, size_t size);

  static size_t segment_bytes(int ranks, size_t slot_bytes);
  Counter& progress(int rank) const;
  char* slot(int rank, uint64_t chunk) const;
  char* result(uint64_t chunk) const;
  // Announces this rank's next step, then waits until every rank made it.
  void step(Deadline deadline);
  // This rank's share [begin, end) of `bytes`, cut at element boundaries.
  void share(size_t bytes, size_t elem, int rank, size_t* begin, size_t* end) const;

  int rank_;
  int ranks_;
  size_t slot_bytes_;
  int fd_;
  int owner_pid_;
  char* base_;
  size_t size_;
  uint64_t steps_ = 0;   // steps this rank took (every rank takes the same)
  uint64_t chunks_ = 0;  // chunks done (selects the double buffer)
};

}  // namespace vnpu::hccl
