#include "csrc/distributed/shm_transport.h"

#include <ATen/ops/from_blob.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <c10/util/Exception.h>
#include <vnpu/environment.h>
#include <vnpu/hccl/shm_group.h>

namespace torch_npu {
namespace {

using vnpu::hccl::ShmGroup;

ShmGroup::Deadline deadline_after(Transport::Timeout timeout) { return std::chrono::steady_clock::now() + timeout; }

// The arithmetic of a shared-memory reduction, with ATen's CPU kernels.
ShmGroup::ReduceFn reducer(at::ScalarType dtype, c10d::ReduceOp::RedOpType op) {
  return [dtype, op](void* dst, const void* const* srcs, int count, size_t bytes) {
    const auto options = at::TensorOptions().dtype(dtype);
    const int64_t n = static_cast<int64_t>(bytes / c10::elementSize(dtype));
    at::Tensor out = at::from_blob(dst, {n}, options);
    if (dst != srcs[0]) out.copy_(at::from_blob(const_cast<void*>(srcs[0]), {n}, options));
    for (int k = 1; k < count; ++k) {
      const at::Tensor src = at::from_blob(const_cast<void*>(srcs[k]), {n}, options);
      switch (op) {
        case c10d::ReduceOp::SUM: out.add_(src); break;
        case c10d::ReduceOp::PRODUCT: out.mul_(src); break;
        case c10d::ReduceOp::MIN: at::minimum_out(out, out, src); break;
        case c10d::ReduceOp::MAX: at::maximum_out(out, out, src); break;
        default: TORCH_INTERNAL_ASSERT(false, "no shared-memory reduction for ReduceOp ", static_cast<int>(op));
      }
    }
  };
}

}  // namespace

void shm_allreduce(ShmGroup& shm, const at::Tensor& tensor, const c10d::ReduceOp& op, Transport::Timeout timeout) {
  shm.allreduce(tensor.data_ptr(), tensor.nbytes(), tensor.element_size(), reducer(tensor.scalar_type(), op.op_),
                deadline_after(timeout));
}

void shm_broadcast(ShmGroup& shm, const at::Tensor& tensor, int root, Transport::Timeout timeout) {
  shm.broadcast(tensor.data_ptr(), tensor.nbytes(), root, deadline_after(timeout));
}

ShmTransport::ShmTransport(c10::intrusive_ptr<c10d::Backend> sockets, std::shared_ptr<ShmGroup> shm)
    : SocketTransport(std::move(sockets)), shm_(std::move(shm)) {
  TORCH_INTERNAL_ASSERT(shm_, "ShmTransport needs the host's shared-memory group");
}

bool ShmTransport::uses_zero_copy() const { return shm_->zero_copy(); }

void ShmTransport::check_in_sync(c10d::OpType type, const at::Tensor& t, Timeout timeout) {
  if (!vnpu::environment().hccl_desync_debug) return;
  const uint64_t mine = signature_of(type, t);
  uint64_t theirs = 0;
  const int other = shm_->compare_signatures(mine, &theirs, deadline_after(timeout));
  if (other >= 0) raise_mismatch(shm_->rank(), mine, other, theirs);
}

void ShmTransport::broadcast(const at::Tensor& tensor, const c10d::BroadcastOptions& opts, Timeout timeout) {
  check_in_sync(c10d::OpType::BROADCAST, tensor, timeout);
  shm_broadcast(*shm_, tensor, static_cast<int>(opts.rootRank), timeout);
}

void ShmTransport::allreduce(const at::Tensor& tensor, const c10d::ReduceOp& op, Timeout timeout) {
  check_in_sync(c10d::OpType::ALLREDUCE, tensor, timeout);
  shm_allreduce(*shm_, tensor, op, timeout);
}

void ShmTransport::allgather_into_tensor(const at::Tensor& output, const at::Tensor& input, Timeout timeout) {
  check_in_sync(c10d::OpType::_ALLGATHER_BASE, input, timeout);
  shm_->allgather(input.data_ptr(), input.nbytes(), output.data_ptr(), deadline_after(timeout));
}

void ShmTransport::reduce_scatter_tensor(const at::Tensor& output, const at::Tensor& input, const c10d::ReduceOp& op,
                                         Timeout timeout) {
  check_in_sync(c10d::OpType::_REDUCE_SCATTER_BASE, output, timeout);
  shm_->reduce_scatter(input.data_ptr(), output.nbytes(), output.data_ptr(), output.element_size(),
                       reducer(output.scalar_type(), op.op_), deadline_after(timeout));
}

}  // namespace torch_npu
