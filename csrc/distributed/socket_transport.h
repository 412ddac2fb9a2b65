// SocketTransport: every collective over the whole group's sockets, PyTorch's
// ProcessGroupGloo (transport.h). The transport of groups whose hosts each
// hold one rank, and the base of the shared-memory transports, which run here
// what they do not do themselves.
#pragma once

#include "csrc/distributed/self_exchange.h"
#include "csrc/distributed/transport.h"

namespace torch_npu {

class SocketTransport : public Transport {
 public:
  // `group`: the whole group's ProcessGroupGloo (not null).
  explicit SocketTransport(c10::intrusive_ptr<c10d::Backend> group);

  std::string name() const override { return "sockets"; }
  bool uses_shared_memory() const override { return false; }
  bool uses_zero_copy() const override { return false; }
  bool meet_peers() override { return group_->getSize() == 1; }

  void broadcast(const at::Tensor& tensor, const c10d::BroadcastOptions& opts, Timeout timeout) override;
  void allreduce(const at::Tensor& tensor, const c10d::ReduceOp& op, Timeout timeout) override;
  void allgather_into_tensor(const at::Tensor& output, const at::Tensor& input, Timeout timeout) override;
  void reduce_scatter_tensor(const at::Tensor& output, const at::Tensor& input, const c10d::ReduceOp& op,
                             Timeout timeout) override;

  void allreduce_coalesced(const at::Tensor& tensor, const c10d::ReduceOp& op) override;
  void allgather_into_tensor_coalesced(const at::Tensor& output, const at::Tensor& input) override;
  void reduce_scatter_tensor_coalesced(const at::Tensor& output, const at::Tensor& input,
                                       const c10d::ReduceOp& op) override;
  void reduce(const at::Tensor& tensor, const c10d::ReduceOp& op, int root) override;
  void allgather(const std::vector<at::Tensor>& outputs, const at::Tensor& input) override;
  void scatter(const at::Tensor& output, const std::vector<at::Tensor>& inputs,
               const c10d::ScatterOptions& opts) override;
  void reduce_scatter(const at::Tensor& output, const std::vector<at::Tensor>& inputs,
                      const c10d::ReduceOp& op) override;
  void alltoall_base(const at::Tensor& output, const at::Tensor& input, const std::vector<int64_t>& output_splits,
                     const std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) override;
  void alltoall(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                const c10d::AllToAllOptions& opts) override;

  c10::intrusive_ptr<c10d::Work> send(const at::Tensor& tensor, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(const at::Tensor& tensor, int src_rank, int tag) override;

 protected:
  // The desync check over sockets: an all-gather of the ranks' signatures.
  void check_in_sync(c10d::OpType type, const at::Tensor& t);
  // All-reduce over `group` (the whole group's, or the hosts' leaders').
  static void allreduce_over(c10d::Backend& group, const at::Tensor& tensor, const c10d::ReduceOp& op);

  c10::intrusive_ptr<c10d::Backend> group_;
  SelfExchange self_;  // sends and recvs of this rank with itself
};

}  // namespace torch_npu
