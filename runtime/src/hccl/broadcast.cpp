// ShmGroup::broadcast (shm_group.h).
// broadcast: the root's buffer read directly, or chunk by chunk through a result buffer.
#include "vnpu/hccl/shm_group.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace vnpu::hccl {

void ShmGroup::broadcast(void* data, size_t bytes, int root, Deadline deadline) {
  char* bytes_io = static_cast<char*>(data);
  if (zero_copy_ && bytes >= kZeroCopyMinBytes && post_buffers(data, bytes, nullptr, 0, deadline)) {
    if (rank_ != root) std::memcpy(bytes_io, peer_in(root), bytes);
    step(deadline);
    return;
  }
  for (size_t offset = 0; offset < bytes; offset += slot_bytes_) {
    const size_t chunk = std::min(slot_bytes_, bytes - offset);
    const uint64_t c = chunks_++;
    if (rank_ == root) std::memcpy(result(c), bytes_io + offset, chunk);
    step(deadline);
    if (rank_ != root) std::memcpy(bytes_io + offset, result(c), chunk);
  }
}

}  // namespace vnpu::hccl
