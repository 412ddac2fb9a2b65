// The live hccl groups, found by comm name for the operators that lease a
// collective turn (csrc/core/comm_lease.h): the CommLeaser this library
// installs when it loads.
#include <algorithm>
#include <mutex>
#include <vector>

#include <c10/util/Exception.h>

#include "csrc/core/comm_lease.h"
#include "csrc/distributed/process_group_hccl.h"

namespace torch_npu {
namespace {

std::mutex g_groups_mutex;
std::vector<ProcessGroupHCCL*> g_groups;  // guarded by g_groups_mutex

std::shared_ptr<CommLease> lease_by_name(const std::string& comm_name, const char* op) {
  std::lock_guard<std::mutex> lock(g_groups_mutex);  // a group cannot be destroyed while it is leased from
  for (ProcessGroupHCCL* group : g_groups) {
    if (group->has_hccl_comm_name(comm_name)) return group->lease(op);
  }
  TORCH_CHECK(false, op, ": group '", comm_name, "' is not the hccl comm name of a process group of this process "
              "(get it with pg._get_backend(torch.device('npu')).get_hccl_comm_name(rank)).");
}

const bool g_installed = (set_comm_leaser(&lease_by_name), true);

}  // namespace

void register_leasable_group(ProcessGroupHCCL* group) {
  (void)g_installed;
  std::lock_guard<std::mutex> lock(g_groups_mutex);
  g_groups.push_back(group);
}

void unregister_leasable_group(ProcessGroupHCCL* group) {
  std::lock_guard<std::mutex> lock(g_groups_mutex);
  g_groups.erase(std::remove(g_groups.begin(), g_groups.end(), group), g_groups.end());
}

}  // namespace torch_npu
