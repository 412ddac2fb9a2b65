// ShmGroup::allgather (shm_group.h).
// allgather: every rank's input read directly, or chunk by chunk through the slots.
#include "vnpu/hccl/shm_group.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace vnpu::hccl {

void ShmGroup::allgather(const void* in, size_t bytes, void* out, Deadline deadline) {
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  // Zero copy reads `in` of every rank while writing `out`: `in` may be this
  // rank's own block of `out` (FSDP's layout), but must not overlap it otherwise.
  const bool own_block = src == dst + rank_ * bytes;
  const bool overlaps = src < dst + ranks_ * bytes && dst < src + bytes;
  if (zero_copy_ && bytes >= kZeroCopyMinBytes && (own_block || !overlaps) &&
      post_buffers(in, bytes, out, ranks_ * bytes, deadline)) {
    for (int r = 0; r < ranks_; ++r) {
      if (r == rank_ && own_block) continue;
      std::memcpy(dst + r * bytes, peer_in(r), bytes);
    }
    step(deadline);
    return;
  }
  for (size_t offset = 0; offset < bytes; offset += slot_bytes_) {
    const size_t chunk = std::min(slot_bytes_, bytes - offset);
    const uint64_t c = chunks_++;
    std::memcpy(slot(rank_, c), src + offset, chunk);
    step(deadline);
    for (int r = 0; r < ranks_; ++r) std::memcpy(dst + r * bytes + offset, slot(r, c), chunk);
  }
}

}  // namespace vnpu::hccl
