#include "csrc/distributed/socket_transport.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <c10/util/Exception.h>
#include <vnpu/environment.h>

namespace torch_npu {

SocketTransport::SocketTransport(c10::intrusive_ptr<c10d::Backend> group) : group_(std::move(group)) {
  TORCH_INTERNAL_ASSERT(group_, "SocketTransport needs the group's ProcessGroupGloo");
}

void SocketTransport::check_in_sync(c10d::OpType type, const at::Tensor& t) {
  if (!vnpu::environment().hccl_desync_debug) return;
  const uint64_t mine = signature_of(type, t);
  std::vector<at::Tensor> in{at::full({1}, static_cast<int64_t>(mine), at::kLong)};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < group_->getSize(); ++r) out[0].push_back(at::empty({1}, at::kLong));
  group_->allgather(out, in)->wait();
  for (int r = 0; r < group_->getSize(); ++r) {
    const uint64_t theirs = static_cast<uint64_t>(out[0][r].item<int64_t>());
    if (theirs != mine) raise_mismatch(group_->getRank(), mine, r, theirs);
  }
}

void SocketTransport::allreduce_over(c10d::Backend& group, const at::Tensor& tensor, const c10d::ReduceOp& op) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions o;
  o.reduceOp = op;
  group.allreduce(tensors, o)->wait();
}

void SocketTransport::broadcast(const at::Tensor& tensor, const c10d::BroadcastOptions& opts, Timeout /*timeout*/) {
  check_in_sync(c10d::OpType::BROADCAST, tensor);
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions o = opts;
  o.rootTensor = 0;
  group_->broadcast(tensors, o)->wait();
}

void SocketTransport::allreduce(const at::Tensor& tensor, const c10d::ReduceOp& op, Timeout /*timeout*/) {
  check_in_sync(c10d::OpType::ALLREDUCE, tensor);
  allreduce_over(*group_, tensor, op);
}

void SocketTransport::allgather_into_tensor(const at::Tensor& output, const at::Tensor& input, Timeout /*timeout*/) {
  check_in_sync(c10d::OpType::_ALLGATHER_BASE, input);
  at::Tensor out = output, in = input;
  group_->_allgather_base(out, in)->wait();
}

void SocketTransport::reduce_scatter_tensor(const at::Tensor& output, const at::Tensor& input,
                                            const c10d::ReduceOp& op, Timeout /*timeout*/) {
  check_in_sync(c10d::OpType::_REDUCE_SCATTER_BASE, output);
  at::Tensor out = output, in = input;
  c10d::ReduceScatterOptions o;
  o.reduceOp = op;
  group_->_reduce_scatter_base(out, in, o)->wait();
}

void SocketTransport::allreduce_coalesced(const at::Tensor& tensor, const c10d::ReduceOp& op) {
  allreduce_over(*group_, tensor, op);
}

void SocketTransport::allgather_into_tensor_coalesced(const at::Tensor& output, const at::Tensor& input) {
  at::Tensor out = output, in = input;
  group_->_allgather_base(out, in)->wait();
}

void SocketTransport::reduce_scatter_tensor_coalesced(const at::Tensor& output, const at::Tensor& input,
                                                      const c10d::ReduceOp& op) {
  at::Tensor out = output, in = input;
  c10d::ReduceScatterOptions o;
  o.reduceOp = op;
  group_->_reduce_scatter_base(out, in, o)->wait();
}

void SocketTransport::reduce(const at::Tensor& tensor, const c10d::ReduceOp& op, int root) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::ReduceOptions o;
  o.reduceOp = op;
  o.rootRank = root;
  group_->reduce(tensors, o)->wait();
}

void SocketTransport::allgather(const std::vector<at::Tensor>& outputs, const at::Tensor& input) {
  std::vector<std::vector<at::Tensor>> out{outputs};
  std::vector<at::Tensor> in{input};
  group_->allgather(out, in)->wait();
}

void SocketTransport::scatter(const at::Tensor& output, const std::vector<at::Tensor>& inputs,
                              const c10d::ScatterOptions& opts) {
  std::vector<at::Tensor> out{output};
  std::vector<std::vector<at::Tensor>> in;
  if (!inputs.empty()) in.push_back(inputs);
  group_->scatter(out, in, opts)->wait();
}

void SocketTransport::reduce_scatter(const at::Tensor& output, const std::vector<at::Tensor>& inputs,
                                     const c10d::ReduceOp& op) {
  std::vector<at::Tensor> out{output};
  std::vector<std::vector<at::Tensor>> in{inputs};
  c10d::ReduceScatterOptions o;
  o.reduceOp = op;
  group_->reduce_scatter(out, in, o)->wait();
}

void SocketTransport::alltoall_base(const at::Tensor& output, const at::Tensor& input,
                                    const std::vector<int64_t>& output_splits,
                                    const std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  at::Tensor out = output, in = input;
  std::vector<int64_t> out_splits = output_splits, in_splits = input_splits;
  group_->alltoall_base(out, in, out_splits, in_splits, opts)->wait();
}

void SocketTransport::alltoall(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                               const c10d::AllToAllOptions& opts) {
  std::vector<at::Tensor> out = outputs, in = inputs;
  group_->alltoall(out, in, opts)->wait();
}

c10::intrusive_ptr<c10d::Work> SocketTransport::send(const at::Tensor& tensor, int dst_rank, int tag) {
  std::vector<at::Tensor> tensors{tensor};
  return group_->send(tensors, dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> SocketTransport::recv(const at::Tensor& tensor, int src_rank, int tag) {
  std::vector<at::Tensor> tensors{tensor};
  return group_->recv(tensors, src_rank, tag);
}

}  // namespace torch_npu
