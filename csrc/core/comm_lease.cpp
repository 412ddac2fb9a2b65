// The one CommLeaser of the process (comm_lease.h).
#include "csrc/core/comm_lease.h"

#include <atomic>

#include <c10/util/Exception.h>

namespace torch_npu {
namespace {
std::atomic<const CommLeasers*> g_leasers{nullptr};

const CommLeasers& leasers(const char* op, const std::string& group) {
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
