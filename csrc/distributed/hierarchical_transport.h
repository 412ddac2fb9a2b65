// HierarchicalTransport: a group over several hosts, some of several ranks
// (transport.h).
//
// An all-reduce reduces inside each host over its vnpu::hccl::ShmGroup, then
// across the hosts between their leaders (each host's first rank) over the
// leaders' own ProcessGroupGloo, then broadcasts inside the host. The other
// collectives run over the whole group's sockets (SocketTransport): only the
// all-reduce is hierarchical.
#pragma once

#include "csrc/distributed/socket_transport.h"

namespace vnpu::hccl {
class ShmGroup;
}

namespace torch_npu {

class HierarchicalTransport final : public SocketTransport {
 public:
  // `host`: this host's ranks' ShmGroup (null when the host holds this rank
  // only). `leaders`: the hosts' leaders' sockets, on a leader (else null).
  HierarchicalTransport(c10::intrusive_ptr<c10d::Backend> sockets, std::shared_ptr<vnpu::hccl::ShmGroup> host,
                        c10::intrusive_ptr<c10d::Backend> leaders);

  std::string name() const override { return "hierarchical"; }
  bool uses_shared_memory() const override { return host_ != nullptr; }
  bool uses_zero_copy() const override;

  // Checked over the whole group's sockets (the ranks of other hosts share no memory with this one).
  void allreduce(const at::Tensor& tensor, const c10d::ReduceOp& op, Timeout timeout) override;

 private:
  std::shared_ptr<vnpu::hccl::ShmGroup> host_;
  c10::intrusive_ptr<c10d::Backend> leaders_;
};

}  // namespace torch_npu
