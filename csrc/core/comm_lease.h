// CommLease: an hccl group's next collective turn, taken by an operator
// that communicates from inside a compute-stream task (the mc2 operators of
// the aclnn API: a matmul fused with a collective, csrc/opapi/aclnn_mc2.cpp).
//
// Note [Collectives inside a compute-stream task]
// A process group's collectives run one at a time, in issue order, on its
// communication stream. An operator running inside a compute-stream task
// cannot queue a collective there and wait for it: a collective queued
// earlier may itself wait for this very task (it was issued after the
// operator, from the same stream), so neither would ever run. Instead, when
// the operator is prepared on the host (aclnnXxxGetWorkspaceSize, in issue
// order), it takes the group's next turn: the communication stream gets a
// task that holds it until the lease is released. The operator's task then
// waits for the group's earlier collectives (wait_turn), uses the group's
// transport itself, and releases the turn when the lease is destroyed
// (done, failed, or never run). Every rank does this at the same point of
// its issue order, so the ranks' collectives still pair up.
//
// csrc/core holds only this interface, so that csrc/opapi need not depend
// on csrc/distributed, which implements it (ProcessGroupHCCL::lease) and
// installs the leaser when it loads.
#pragma once

#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

namespace torch_npu {

class CommLease {
 public:
  virtual ~CommLease() = default;  // releases the turn
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Blocks until the group's collectives issued before the lease are done.
  // Call it first, inside the task.
  virtual void wait_turn() = 0;
  // Collectives over the group, on contiguous CPU tensors (views of device
  // memory), blocking until this rank's part is done; raise on failure.
  virtual void allreduce_sum(const at::Tensor& tensor) = 0;
  // `output` holds every rank's `input`, rank after rank.
  virtual void allgather(const at::Tensor& output, const at::Tensor& input) = 0;
  // `input` holds size() equal blocks; rank r gets the sum of the r-th blocks.
  virtual void reduce_scatter_sum(const at::Tensor& output, const at::Tensor& input) = 0;
  // `input` holds size() equal blocks; block r goes to rank r, and
  // `output`'s block r comes from rank r.
  virtual void alltoall(const at::Tensor& output, const at::Tensor& input) = 0;
};

// Takes the next collective turn of the hccl process group whose comm name
// (get_hccl_comm_name, of any of its ranks) is `comm_name`, for the operator
// `op` (a string literal). Raises c10::Error naming the group when no live
// group has that name, when no hccl backend is loaded, or when called inside
// a stream task (the host thread alone knows the issue order).
std::shared_ptr<CommLease> lease_comm(const std::string& comm_name, const char* op);

// The same for LCAL's way of naming a group (ATB's LinearParallelParam,
// backend "lcoc"): communication domain `domain` of `size` ranks is the
// devices domain * size ... (domain + 1) * size - 1 of one host, this
// process being its rank `rank`. vNPU runs one process per device, so that
// is the hccl group whose global ranks are those numbers, in order.
std::shared_ptr<CommLease> lease_comm_domain(int64_t domain, int64_t rank, int64_t size, const char* op);

struct CommLeasers {
  std::shared_ptr<CommLease> (*by_name)(const std::string& comm_name, const char* op);
  std::shared_ptr<CommLease> (*by_domain)(int64_t domain, int64_t rank, int64_t size, const char* op);
};
// Installed once by the hccl backend (csrc/distributed).
void set_comm_leasers(CommLeasers leasers);

}  // namespace torch_npu
