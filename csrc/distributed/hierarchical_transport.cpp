#include "csrc/distributed/hierarchical_transport.h"

#include <vnpu/hccl/shm_group.h>

#include "csrc/distributed/shm_transport.h"

namespace torch_npu {

HierarchicalTransport::HierarchicalTransport(c10::intrusive_ptr<c10d::Backend> sockets,
                                             std::shared_ptr<vnpu::hccl::ShmGroup> host,
                                             c10::intrusive_ptr<c10d::Backend> leaders)
    : SocketTransport(std::move(sockets)), host_(std::move(host)), leaders_(std::move(leaders)) {}

bool HierarchicalTransport::uses_zero_copy() const { return host_ != nullptr && host_->zero_copy(); }

void HierarchicalTransport::allreduce(const at::Tensor& tensor, const c10d::ReduceOp& op, Timeout timeout) {
  check_in_sync(c10d::OpType::ALLREDUCE, tensor);
  // Reduce inside the host, across hosts between the leaders, back to the host.
  if (host_) shm_allreduce(*host_, tensor, op, timeout);
  if (leaders_) allreduce_over(*leaders_, tensor, op);
  if (host_) shm_broadcast(*host_, tensor, 0, timeout);
}

}  // namespace torch_npu
