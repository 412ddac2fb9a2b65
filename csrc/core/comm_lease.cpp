// The one CommLeaser of the process (comm_lease.h).
#include "csrc/core/comm_lease.h"

#include <atomic>

#include <c10/util/Exception.h>
#include <vnpu/stream.h>

namespace torch_npu {
namespace {
std::atomic<const CommLeasers*> g_leasers{nullptr};

const CommLeasers& leasers(const char* op, const std::string& group) {
  // The turn orders the operator among the group's collectives in issue
  // order, which only the host thread knows.
  TORCH_CHECK(vnpu::Stream::running_on_this_thread() == nullptr, op, " must be called on the host thread (its "
              "aclnnXxxGetWorkspaceSize as op-plugin's EXEC_NPU_CMD and MindSpeed's ACLNN_CMD call it, its ATB Setup "
              "as MindSpeed's RunAtbCmd does), not inside a stream task: vNPU orders the operator's collective among "
              "the group's others when it is prepared.");
  const CommLeasers* installed = g_leasers.load();
  TORCH_CHECK(installed != nullptr, op, ": no hccl process group is available (group ", group,
              "): call torch.distributed.init_process_group('hccl') first.");
  return *installed;
}
}  // namespace

void set_comm_leasers(CommLeasers leasers) {
  static CommLeasers installed;  // set once, at load
  installed = leasers;
  g_leasers.store(&installed);
}

std::shared_ptr<CommLease> lease_comm(const std::string& comm_name, const char* op) {
  return leasers(op, "'" + comm_name + "'").by_name(comm_name, op);
}

std::shared_ptr<CommLease> lease_comm_domain(int64_t domain, int64_t rank, int64_t size, const char* op) {
  return leasers(op, "of communication domain " + std::to_string(domain)).by_domain(domain, rank, size, op);
}

}  // namespace torch_npu
