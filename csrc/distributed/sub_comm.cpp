#include "csrc/distributed/sub_comm.h"

#include <functional>
#include <mutex>

#include <vnpu/log.h>

namespace torch_npu {
namespace {

constexpr const char* kLogger = "torch.distributed";
constexpr const char* kSource = "ProcessGroupHCCL.cpp";

std::mutex g_mutex;
const void* g_world = nullptr;          // guarded by g_mutex
std::vector<std::string> g_world_hosts;  // guarded by g_mutex

}  // namespace

void remember_world_hosts(const void* world_group, std::vector<std::string> hosts) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_world = world_group;
  g_world_hosts = std::move(hosts);
}

void forget_world_hosts(const void* world_group) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_world != world_group) return;  // a later world group replaced it
  g_world = nullptr;
  g_world_hosts.clear();
}

std::vector<std::string> derived_hosts(const std::vector<uint64_t>& global_ranks) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<std::string> hosts;
  if (g_world == nullptr || g_world_hosts.empty() || global_ranks.empty()) return hosts;
  for (uint64_t rank : global_ranks) {
    if (rank >= g_world_hosts.size()) return {};
    hosts.push_back(g_world_hosts[rank]);
  }
  return hosts;
}

void log_comm_created(const CommCreation& creation, const std::string& group_id, int device) {
  if (!vnpu::log::enabled(kLogger, vnpu::log::Level::kInfo)) return;
  const std::string took = std::to_string(creation.took.count());
  switch (creation.kind) {
    case CommCreation::Kind::kDerived: {
      // torch_npu's sub-communicator id: the hash of the group's id.
      const std::string id = std::to_string(std::hash<std::string>{}(group_id));
      vnpu::log::write(kLogger, vnpu::log::Level::kInfo, kSource,
                       "Create sub hccl comm by hcclCreateSubCommConfig success, group id is " + group_id +
                           ", subCommId is " + id + ", devicesKey is " + std::to_string(device) + ", use " + took +
                           " ms.");
      return;
    }
    case CommCreation::Kind::kDerivationFailed:
      vnpu::log::write(kLogger, vnpu::log::Level::kInfo, kSource,
                       "Sub comm derivation failed in createHCCLCommOrigin, fallback to rootinfo.");
      [[fallthrough]];
    case CommCreation::Kind::kRootInfo:
      vnpu::log::write(kLogger, vnpu::log::Level::kInfo, kSource,
                       "Create hccl comm by hcclCommInitRootInfoConfig success, group id is " + group_id +
                           ", commType is 0, use " + took + " ms.");
      return;
  }
}

}  // namespace torch_npu
