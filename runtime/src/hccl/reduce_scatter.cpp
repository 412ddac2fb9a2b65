// ShmGroup::reduce_scatter (shm_group.h).
// reduce_scatter: this rank's block reduced over the peers' inputs, or piece by piece
// through the slots.
#include "vnpu/hccl/shm_group.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace vnpu::hccl {

void ShmGroup::reduce_scatter(const void* in, size_t bytes, void* out, size_t elem, const ReduceFn& reduce,
                              Deadline deadline) {
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  std::vector<const void*> sources(ranks_);
  // Zero copy: this rank alone reads block rank() of the inputs, so `out`
  // may be that block of its own input, but must not overlap it otherwise.
  const bool own_block = dst == src + rank_ * bytes;
  const bool overlaps = dst < src + ranks_ * bytes && src < dst + bytes;
  if (zero_copy_ && bytes * ranks_ >= kZeroCopyMinBytes && (own_block || !overlaps) &&
      post_buffers(in, ranks_ * bytes, out, bytes, deadline)) {
    // In place, dst is this rank's own block: put it first (ReduceFn's contract).
    for (int k = 0; k < ranks_; ++k) sources[k] = peer_in((rank_ + k) % ranks_) + rank_ * bytes;
    if (bytes > 0) reduce(dst, sources.data(), ranks_, bytes);
    step(deadline);
    return;
  }
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

}  // namespace vnpu::hccl
