// ShmGroup::allreduce (shm_group.h).
// allreduce: zero copy over the peers' buffers, or chunk by chunk through the slots.
#include "vnpu/hccl/shm_group.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace vnpu::hccl {

void ShmGroup::allreduce(void* data, size_t bytes, size_t elem, const ReduceFn& reduce, Deadline deadline) {
  char* bytes_in = static_cast<char*>(data);
  std::vector<const void*> sources(ranks_);
  if (zero_copy_ && bytes >= kZeroCopyMinBytes && post_buffers(data, bytes, nullptr, 0, deadline)) {
    // Each rank reduces its share of every rank's buffer into its own
    // buffer: nobody else reads that share of it until the next step.
    size_t begin = 0, end = 0;
    share(bytes, elem, rank_, &begin, &end);
    if (end > begin) {
      // This rank's buffer first: it is also the destination (ReduceFn's contract).
      for (int k = 0; k < ranks_; ++k) sources[k] = peer_in((rank_ + k) % ranks_) + begin;
      reduce(bytes_in + begin, sources.data(), ranks_, end - begin);
    }
    step(deadline);
    // Then takes every other share from the rank that reduced it.
    for (int r = 0; r < ranks_; ++r) {
      if (r == rank_) continue;
      share(bytes, elem, r, &begin, &end);
      std::memcpy(bytes_in + begin, peer_in(r) + begin, end - begin);
    }
    step(deadline);  // nobody may change its buffer while a peer still reads it
    return;
  }
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

}  // namespace vnpu::hccl
