#include "csrc/distributed/socket_transport.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <c10/util/strides.h>
#include <c10/util/Exception.h>
#include <vnpu/environment.h>

#include <numeric>

namespace torch_npu {

namespace {

// Gloo handles the dtypes it can reduce (float, double, half, bfloat16, int8,
// uint8, bool, int32, int64) and refuses the rest ("Invalid scalar type").
// HCCL moves every dtype, uint16/32/64 and int16 included, so the collectives
// that only move bytes send those as uint8 views of the same memory.
bool gloo_moves(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16:
    case at::kChar: case at::kByte: case at::kBool: case at::kInt: case at::kLong:
      return true;
    default:
      return false;
  }
}

// `t` (contiguous, as the group stages it) as Gloo can move it: itself, or its
// bytes with the same leading dimension (the last one grows by the element
// size; a 0-d tensor becomes one row of bytes). A contiguous tensor may still
// carry any stride on a dimension of size 1, which a dtype view refuses, so
// the bytes are taken over the sizes' own row-major strides.
at::Tensor movable(const at::Tensor& t) {
  if (gloo_moves(t.scalar_type())) return t;
  TORCH_INTERNAL_ASSERT(t.is_contiguous(), "the transport moves contiguous tensors");
  const at::Tensor rows = t.dim() == 0 ? t.reshape({1}) : t;
  return rows.as_strided(rows.sizes(), c10::contiguous_strides(rows.sizes())).view(at::kByte);
}

std::vector<at::Tensor> movable(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(movable(t));
  return out;
}

// alltoall_base splits a 1-d tensor by elements; as bytes, by element bytes.
std::vector<int64_t> movable_splits(const at::Tensor& t, const std::vector<int64_t>& splits) {
  if (gloo_moves(t.scalar_type()) || t.dim() > 1) return splits;
  std::vector<int64_t> out = splits;
  for (auto& s : out) s *= static_cast<int64_t>(t.element_size());
  return out;
}

}  // namespace

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
  std::vector<at::Tensor> tensors{movable(tensor)};
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
  at::Tensor out = movable(output), in = movable(input);
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
  at::Tensor out = movable(output), in = movable(input);
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
  std::vector<std::vector<at::Tensor>> out{movable(outputs)};
  std::vector<at::Tensor> in{movable(input)};
  group_->allgather(out, in)->wait();
}

void SocketTransport::scatter(const at::Tensor& output, const std::vector<at::Tensor>& inputs,
                              const c10d::ScatterOptions& opts) {
  std::vector<at::Tensor> out{movable(output)};
  std::vector<std::vector<at::Tensor>> in;
  if (!inputs.empty()) in.push_back(movable(inputs));
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
  at::Tensor out = movable(output), in = movable(input);
  std::vector<int64_t> out_splits = movable_splits(output, output_splits);
  std::vector<int64_t> in_splits = movable_splits(input, input_splits);
  group_->alltoall_base(out, in, out_splits, in_splits, opts)->wait();
}

void SocketTransport::alltoall(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                               const c10d::AllToAllOptions& opts) {
  // HCCL's list form takes tensors of any sizes (alltoallv); Gloo's wants them
  // all alike. So they travel end to end, flat, as one alltoall_base whose
  // splits are the tensors' sizes.
  auto flat = [](const std::vector<at::Tensor>& ts, std::vector<int64_t>& splits) {
    std::vector<at::Tensor> rows;
    for (const auto& t : ts) {
      rows.push_back(movable(t.reshape({-1})).reshape({-1}));
      splits.push_back(rows.back().numel());
    }
    return rows;
  };
  std::vector<int64_t> in_splits, out_splits;
  at::Tensor in = at::cat(flat(inputs, in_splits));
  const std::vector<at::Tensor> out_rows = flat(outputs, out_splits);
  at::Tensor out = at::empty({std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0})},
                             out_rows.empty() ? in.options() : out_rows[0].options());
  // Gloo takes the splits over (moves them into its work): it gets copies.
  std::vector<int64_t> gloo_out_splits = out_splits, gloo_in_splits = in_splits;
  group_->alltoall_base(out, in, gloo_out_splits, gloo_in_splits, opts)->wait();
  int64_t offset = 0;
  for (size_t i = 0; i < out_rows.size(); ++i) {
    out_rows[i].copy_(out.narrow(0, offset, out_splits[i]));
    offset += out_splits[i];
  }
}

c10::intrusive_ptr<c10d::Work> SocketTransport::send(const at::Tensor& tensor, int dst_rank, int tag) {
  if (dst_rank == group_->getRank()) return self_.send(tensor, tag);
  std::vector<at::Tensor> tensors{movable(tensor)};
  return group_->send(tensors, dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> SocketTransport::recv(const at::Tensor& tensor, int src_rank, int tag) {
  if (src_rank == group_->getRank()) return self_.recv(tensor, tag);
  std::vector<at::Tensor> tensors{movable(tensor)};
  return group_->recv(tensors, src_rank, tag);
}

}  // namespace torch_npu
