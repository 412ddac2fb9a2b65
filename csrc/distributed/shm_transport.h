// ShmTransport: a group whose ranks all run on one host (transport.h).
//
// Broadcast, all-reduce, all_gather_into_tensor and reduce_scatter_tensor go
// through the host's vnpu::hccl::ShmGroup (runtime/src/hccl), zero copy where
// the device memory is shared; the other collectives run over the group's
// sockets (SocketTransport), as ShmGroup has no list forms, rooted
// reductions, all-to-all or point to point.
#pragma once

#include "csrc/distributed/socket_transport.h"

namespace vnpu::hccl {
class ShmGroup;
}

namespace torch_npu {

class ShmTransport final : public SocketTransport {
 public:
  // `shm`: the whole group's (rank for rank), connected and with its memory shared.
  ShmTransport(c10::intrusive_ptr<c10d::Backend> sockets, std::shared_ptr<vnpu::hccl::ShmGroup> shm);

  std::string name() const override { return "shared memory"; }
  bool uses_shared_memory() const override { return true; }
  bool uses_zero_copy() const override;
  bool meet_peers() override { return shm_->meet_peers(std::chrono::microseconds(100)); }

  void broadcast(const at::Tensor& tensor, const c10d::BroadcastOptions& opts, Timeout timeout) override;
  void allreduce(const at::Tensor& tensor, const c10d::ReduceOp& op, Timeout timeout) override;
  void allgather_into_tensor(const at::Tensor& output, const at::Tensor& input, Timeout timeout) override;
  void reduce_scatter_tensor(const at::Tensor& output, const at::Tensor& input, const c10d::ReduceOp& op,
                             Timeout timeout) override;

 private:
  // The desync check over shared memory (ShmGroup::compare_signatures).
  void check_in_sync(c10d::OpType type, const at::Tensor& t, Timeout timeout);

  std::shared_ptr<vnpu::hccl::ShmGroup> shm_;
};

// An all-reduce and a broadcast over `shm` alone, unchecked: ShmTransport's,
// and HierarchicalTransport's steps inside a host.
void shm_allreduce(vnpu::hccl::ShmGroup& shm, const at::Tensor& tensor, const c10d::ReduceOp& op,
                   Transport::Timeout timeout);
void shm_broadcast(vnpu::hccl::ShmGroup& shm, const at::Tensor& tensor, int root, Transport::Timeout timeout);

}  // namespace torch_npu
