// How a group's communicator is made, and torch_npu's log of it.
//
// torch_npu makes a group's HCCL communicator at its first collective on a
// device, from a root info the group's rank 0 broadcasts through the store;
// with ROOTINFO_SUBCOMM_ENABLE=1 a group of some of the world's ranks instead
// derives it from the world group's communicator (hcclCreateSubCommConfig),
// with no exchange. It logs either at INFO on the "torch.distributed" logger.
//
// vNPU's communicator is the group's transport, connected when the group is
// made (process_group_hccl.h). What a sub-group can derive from the world
// group is where each rank runs: the world group read every rank's host, so
// a derived group takes its ranks' hosts from it instead of reading them from
// the store. The log lines come where torch_npu's do: at the group's first
// collective on a device (its communication stream's creation).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace torch_npu {

// The world group's ranks' hosts, kept while it lives (set by its
// constructor, cleared by its destructor).
void remember_world_hosts(const void* world_group, std::vector<std::string> hosts);
void forget_world_hosts(const void* world_group);

// The hosts of a sub-group's ranks (their world ranks `global_ranks`), taken
// from the world group's; empty when there is none to derive from (no world
// group, or it connected without reading hosts).
std::vector<std::string> derived_hosts(const std::vector<uint64_t>& global_ranks);

// How a group made its communicator, for the log.
struct CommCreation {
  enum class Kind { kRootInfo, kDerived, kDerivationFailed } kind = Kind::kRootInfo;
  std::chrono::milliseconds took{0};
};

// torch_npu's INFO lines for a group's communicator on `device`
// ("Create hccl comm by hcclCommInitRootInfoConfig success, ...", or "Create
// sub hccl comm by hcclCreateSubCommConfig success, ..."), written when the
// "torch.distributed" logger is at INFO.
void log_comm_created(const CommCreation& creation, const std::string& group_id, int device);

}  // namespace torch_npu
