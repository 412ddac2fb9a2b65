// What every transport shares (the desync signature), and connect_transport:
// the rendezvous that decides, once per group, which transport it uses.
#include "csrc/distributed/transport.h"

#include <c10/util/Exception.h>
#include <vnpu/hccl/shm_group.h>
#include <vnpu/runtime.h>
#include <vnpu/shared_arena.h>

#include <algorithm>

#include "csrc/core/npu_device.h"
#include "csrc/distributed/hierarchical_transport.h"
#include "csrc/distributed/shm_transport.h"
#include "csrc/distributed/socket_transport.h"

namespace torch_npu {

uint64_t Transport::signature_of(c10d::OpType type, const at::Tensor& t) {
  return (static_cast<uint64_t>(type) << 56) | (static_cast<uint64_t>(t.scalar_type()) << 48) |
         (static_cast<uint64_t>(t.numel()) & ((uint64_t{1} << 48) - 1));
}

namespace {

std::string describe_signature(uint64_t sig) {
  return c10d::opTypeToString(static_cast<c10d::OpType>(sig >> 56)) + " of " +
         std::to_string(sig & ((uint64_t{1} << 48) - 1)) + " " +
         c10::toString(static_cast<at::ScalarType>((sig >> 48) & 0xff)) + " elements";
}

std::vector<uint8_t> as_bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string as_string(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

}  // namespace

void Transport::raise_mismatch(int rank, uint64_t mine, int other, uint64_t theirs) {
  TORCH_CHECK(false, "[Rank ", rank, "] Collective mismatch (TORCH_HCCL_DESYNC_DEBUG=1): this rank runs ",
              describe_signature(mine), " while rank ", other, " runs ", describe_signature(theirs),
              ". Every rank must call the same collectives in the same order with matching tensors.");
}

std::shared_ptr<Transport> connect_transport(c10d::Store& store, int rank, int size, const TransportConfig& config,
                                             const SocketGroupFactory& make_sockets,
                                             std::vector<std::string>* rank_hosts) {
  using vnpu::hccl::ShmGroup;
  // The whole group's sockets come first: every transport has them.
  c10::intrusive_ptr<c10d::Backend> sockets = make_sockets("hccl_transport/", rank, size, config.sockets_timeout);
  TORCH_CHECK(sockets, "ProcessGroupHCCL: no transport backend");
  auto sockets_only = [&] { return std::make_shared<SocketTransport>(sockets); };
  if (size < 2 || config.host_id.empty()) return sockets_only();

  // Every rank reads every rank's host, so all of them decide alike. Hosts
  // are numbered in the order of their first rank; a host's first rank is
  // its leader.
  store.set("hccl/host/" + std::to_string(rank), as_bytes(config.host_id));
  const bool derived = rank_hosts != nullptr && !rank_hosts->empty();
  TORCH_INTERNAL_ASSERT(!derived || static_cast<int>(rank_hosts->size()) == size, "derived hosts of another group");
  std::vector<std::string> hosts;        // host index -> identity
  std::vector<int> host_of(size);        // rank -> host index
  std::vector<int> local_ranks_of_mine;  // ranks on this rank's host
  for (int r = 0; r < size; ++r) {
    const std::string id = derived ? (*rank_hosts)[r] : as_string(store.get("hccl/host/" + std::to_string(r)));
    if (rank_hosts != nullptr && !derived) rank_hosts->push_back(id);
    auto it = std::find(hosts.begin(), hosts.end(), id);
    host_of[r] = static_cast<int>(it - hosts.begin());
    if (it == hosts.end()) hosts.push_back(id);
    if (id == config.host_id) local_ranks_of_mine.push_back(r);
  }
  const int host = host_of[rank];
  const int local_size = static_cast<int>(local_ranks_of_mine.size());
  const int local_rank = static_cast<int>(
      std::find(local_ranks_of_mine.begin(), local_ranks_of_mine.end(), rank) - local_ranks_of_mine.begin());
  // Shared memory needs a host with two ranks or more, and none beyond what a segment holds.
  std::vector<int> ranks_on(hosts.size(), 0);
  for (int h : host_of) ++ranks_on[h];
  const int most = *std::max_element(ranks_on.begin(), ranks_on.end());
  if (most < 2 || most > ShmGroup::kMaxRanks) return sockets_only();

  // The shared-memory group of this host (its first rank makes the segment).
  std::shared_ptr<ShmGroup> shm;
  const std::string key = "hccl/shm/" + std::to_string(host);
  std::string failure;
  if (local_size > 1) {
    try {
      if (local_rank == 0) {
        shm = std::make_shared<ShmGroup>(ShmGroup::create(local_size, config.shm_slot_bytes));
        store.set(key, as_bytes(shm->address()));
      } else {
        shm = std::make_shared<ShmGroup>(
            ShmGroup::attach(local_rank, local_size, config.shm_slot_bytes, as_string(store.get(key))));
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  store.set("hccl/shm_ok/" + std::to_string(rank), as_bytes(failure.empty() ? "1" : "0"));
  bool all_ok = true;
  for (int r = 0; r < size; ++r) all_ok = all_ok && as_string(store.get("hccl/shm_ok/" + std::to_string(r))) == "1";
  if (!all_ok) {
    if (!failure.empty()) {
      TORCH_WARN("ProcessGroupHCCL: no shared memory between the ranks (", failure, "); using sockets");
    }
    return sockets_only();
  }
  if (shm) {
    // Zero copy when every local rank's device memory is shareable
    // (VNPU_SHARED_DEVICE_MEMORY); otherwise the ranks copy through the slots.
    // The runtime's start-up installs the shared arena on the devices: make it
    // now (device_count() alone no longer does before the first device use).
    (void)vnpu::Runtime::instance();
    shm->share_memory(vnpu::existing_shared_arena(), std::chrono::steady_clock::now() + config.timeout);
  }
  if (hosts.size() == 1) return std::make_shared<ShmTransport>(sockets, shm);
  // Hierarchical: the hosts' leaders all-reduce across hosts over sockets of their own.
  c10::intrusive_ptr<c10d::Backend> leaders;
  if (local_rank == 0) leaders = make_sockets("hccl_leaders/", host, static_cast<int>(hosts.size()), config.sockets_timeout);
  return std::make_shared<HierarchicalTransport>(sockets, shm, leaders);
}

}  // namespace torch_npu
