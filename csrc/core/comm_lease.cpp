// The one CommLeaser of the process (comm_lease.h).
#include "csrc/core/comm_lease.h"

#include <atomic>

#include <c10/util/Exception.h>

namespace torch_npu {
namespace {
std::atomic<CommLeaser> g_leaser{nullptr};
}  // namespace

void set_comm_leaser(CommLeaser leaser) { g_leaser.store(leaser); }

std::shared_ptr<CommLease> lease_comm(const std::string& comm_name, const char* op) {
  const CommLeaser leaser = g_leaser.load();
  TORCH_CHECK(leaser != nullptr, op, ": no hccl process group is available (group '", comm_name,
              "'): call torch.distributed.init_process_group('hccl') first.");
  return leaser(comm_name, op);
}

}  // namespace torch_npu
