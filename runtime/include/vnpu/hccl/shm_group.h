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
// adaptor.
//
// Zero copy: after share_memory(), a collective whose buffers lie in every
// rank's SharedArena (device memory) skips the slots: each rank names its
// buffers by their offsets in its arena, and the ranks read (and for
// allreduce, write back) each other's buffers through their mappings of the
// peers' arenas. An allreduce is then one reduce of this rank's share over
// the peers' buffers and one gather of the other shares, instead of copy in,
// reduce, copy out. Buffers outside the arena use the slots, per collective
// (every rank sees every rank's offsets, so all decide alike).
//
// Waits spin briefly, then yield and sleep, and give up at the
// deadline (throwing ShmTimeout) so a stalled peer never hangs a rank. A peer
// whose process has exited (or is a zombie) is noticed while waiting, without
// the deadline: ShmPeerExited, with HCCL's code for a remote rank that never
// arrives (EI0002). Each rank posts its pid when it maps the group.
//
// Thread-safety: one collective at a time per ShmGroup (the hccl backend runs
// them in order on one communication stream).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "vnpu/shared_arena.h"

namespace vnpu::hccl {

// A peer did not arrive before the deadline.
class ShmTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A peer's process ended before taking the step this rank waits for.
class ShmPeerExited : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ShmGroup {
 public:
  static constexpr int kMaxRanks = 64;

  // dst[i] = op(srcs[0][i], ..., srcs[count-1][i]) over `bytes` bytes (a
  // whole number of elements). When dst is one of srcs it is srcs[0], so a
  // ReduceFn may accumulate into dst in place. The ops are commutative; each
  // part of a result is reduced by one rank only, so all ranks get the same bits.
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

  // For a collective that would run on the calling thread: announces that
  // this rank has reached its next collective, and waits up to `patience`
  // for every peer to have reached it too (announced so, or begun it).
  // Returns whether they all did; if not, the caller should queue the
  // collective instead of blocking on a late peer (peers that come later
  // find this rank's announcement, so they need not wait for it). Call it
  // between collectives (not while one runs).
  bool meet_peers(std::chrono::microseconds patience);

  // Collective: every rank calls it, with its arena or nullptr. Maps every
  // peer's arena; returns true (on every rank alike) when all ranks have
  // one and every rank mapped every peer's, which turns zero copy on.
  bool share_memory(std::shared_ptr<SharedArena> own, Deadline deadline);
  bool zero_copy() const { return zero_copy_; }
  // Collectives smaller than this use the slots even with zero copy (an
  // extra step costs more than copying so little).
  static constexpr size_t kZeroCopyMinBytes = 64 << 10;

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
    // share_memory: this rank's arena (pid, fd, size) and whether it mapped all peers'.
    std::atomic<uint64_t> arena_pid, arena_fd, arena_size, mapped_all;
    // Zero copy: offset in this rank's arena of the collective's input
    // (kNotInside when its input or output is outside the arena).
    std::atomic<uint64_t> offset_in;
    // This rank's process (0 until it maps the group), for waits to notice it exited.
    std::atomic<uint64_t> pid;
    // meet_peers: the step this rank's next collective starts with, once it reached it.
    std::atomic<uint64_t> reached;
  };
  static_assert(sizeof(Counter) == 128, "two cache lines per rank");
  ShmGroup(int rank, int ranks, size_t slot_bytes, int fd, int owner_pid, void* base, size_t size);

  static size_t segment_bytes(int ranks, size_t slot_bytes);
  Counter& progress(int rank) const;
  char* slot(int rank, uint64_t chunk) const;
  char* result(uint64_t chunk) const;
  // Announces this rank's next step, then waits until every rank made it.
  void step(Deadline deadline);
  // This rank's share [begin, end) of `bytes`, cut at element boundaries.
  void share(size_t bytes, size_t elem, int rank, size_t* begin, size_t* end) const;
  // Zero copy: posts the offsets of `in` and `out` (nullptr: none) and takes
  // a step; true when every rank's buffers are in its arena.
  bool post_buffers(const void* in, size_t in_bytes, const void* out, size_t out_bytes, Deadline deadline);
  // Rank r's posted input buffer (this rank's own pointer for r == rank()).
  char* peer_in(int r) const;

  int rank_;
  int ranks_;
  size_t slot_bytes_;
  int fd_;          // the segment's memfd (rank 0), or -1
  int owner_pid_;
  char* base_;
  size_t size_;
  std::unique_ptr<PeerMapping> mapping_;  // ranks 1..n-1: rank 0's segment, mapped
  uint64_t steps_ = 0;   // steps this rank took (every rank takes the same)
  uint64_t chunks_ = 0;  // chunks done (selects the double buffer)
  // Zero copy (share_memory): this rank's arena, every rank's mapping
  // (nullptr at this rank's index), and this collective's own input.
  std::shared_ptr<SharedArena> arena_;
  std::vector<std::unique_ptr<PeerMapping>> peers_;
  bool zero_copy_ = false;
  char* own_in_ = nullptr;
};

}  // namespace vnpu::hccl
