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

std::shared_ptr<CommLease> lease_by_domain(int64_t domain, int64_t rank, int64_t size, const char* op) {
  std::lock_guard<std::mutex> lock(g_groups_mutex);
  for (ProcessGroupHCCL* group : g_groups) {
    // torch gives the default group no global ranks: they are 0 ... size - 1.
    const auto& ranks = group->options()->global_ranks_in_group;
    if (group->getSize() != size || group->getRank() != rank || (!ranks.empty() && ranks.size() != static_cast<size_t>(size))) {
      continue;
    }
    bool consecutive = true;
    for (int64_t i = 0; i < size; ++i) {
      const uint64_t global = ranks.empty() ? static_cast<uint64_t>(i) : ranks[i];
      consecutive = consecutive && global == static_cast<uint64_t>(domain * size + i);
    }
    if (consecutive) return group->lease(op);
  }
  TORCH_CHECK(false, op, ": communication domain ", domain, " of ", size, " ranks is the hccl process group of global "
              "ranks ", domain * size, " to ", (domain + 1) * size - 1, " with this process as rank ", rank,
              " on vNPU, and this process has none: create it with torch.distributed.new_group(ranks=...) first.");
}

const bool g_installed = (set_comm_leasers({&lease_by_name, &lease_by_domain}), true);

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
