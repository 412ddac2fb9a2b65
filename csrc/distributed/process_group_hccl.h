// ProcessGroupHCCL: the "hccl" c10d backend of the virtual NPU.
//
// A collective is a task on the process group's communication stream (a
// dedicated stream of the tensors' device), ordered after the work already
// queued on the caller's current stream, exactly like a kernel. The task runs
// the collective over CPU views of the device buffers (device memory is host
// memory) through the group's Transport; the returned WorkHCCL completes when
// that task has, and wait() makes the current stream wait for it (as
// ProcessGroupNCCL does), without blocking the host.
//
// The transport (transport.h) is chosen once, when the group is made, from
// where its ranks run: shared memory on one host, hierarchical over hosts of
// several ranks, sockets (PyTorch's ProcessGroupGloo, which the bindings
// make; this library includes no gloo header) otherwise. The collectives here
// never choose a route; around the transport they apply HCCL's rules: its
// ReduceOps (AVG = SUM then divide, PREMUL_SUM = scale then SUM, bool SUM =
// MAX, BAND/BOR/BXOR rejected), reduction dtypes and messages, and gather
// implemented with a warning.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include "csrc/core/comm_lease.h"
#include "torch_npu/csrc/distributed/ProcessGroupHCCL.hpp"
#include "csrc/distributed/transport.h"

#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "csrc/distributed/hccl_comm_config.h"
#include "csrc/distributed/sub_comm.h"

namespace torch_npu {

class Watchdog;
struct StatusKey;
class WorkHCCL;

// Derives from torch_npu's public type (ProcessGroupHCCL.hpp) so that
// extensions can dynamic_cast a group's backend to it.
class ProcessGroupHCCL : public c10d_npu::ProcessGroupHCCL {
 public:
  // ProcessGroupHCCL.Options, with torch_npu's fields.
  struct Options : c10d::Backend::Options {
    explicit Options(bool is_high_priority_stream = false);
    static c10::intrusive_ptr<Options> create(bool is_high_priority_stream = false) {
      return c10::make_intrusive<Options>(is_high_priority_stream);
    }
    // hccl_buffer_size (int, MB), group_name, hccl_exec_timeout, hccl_algo,
    // hccl_buffer_name, ...: checked when the group is made (hccl_comm_config.h).
    HcclConfigMap hccl_config;
    bool is_high_priority_stream;
    std::string group_id;
    // Which host this rank runs on: ranks of one host exchange through
    // shared memory. Defaults to the host name; torch_npu.distributed sets
    // VNPU_HCCL_HOST's value when given. Empty: no shared memory.
    std::string host_id;
  };

  // Connects the group's transport (connect_transport: a collective over the
  // group, through `store`); `make_sockets` makes its ProcessGroupGloos.
  ProcessGroupHCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   c10::intrusive_ptr<Options> options, const SocketGroupFactory& make_sockets);

  // How long a collective may take: the group's (watchdog) timeout, or HCCL's
  // execution timeout (hccl_config's hccl_exec_timeout, else
  // HCCL_EXEC_TIMEOUT, else 1836 s; 0: none) when earlier. A group left at
  // torch's default 30 minutes gets torch_npu's watchdog timeout, the
  // execution timeout plus 30 minutes (its options show it).
  std::chrono::milliseconds collective_timeout() const;
  // The group's ranks in the world (Options.global_ranks_in_group; the world
  // group's are 0 .. size-1).
  std::vector<uint32_t> global_ranks() const;
  // Slot size of the shared-memory transport (HCCL_BUFFSIZE, hccl_buffer_size).
  static size_t shm_slot_bytes(const HcclCommConfig& config);
  ~ProcessGroupHCCL() override;

  const std::string getBackendName() const override { return "hccl"; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override { return options_; }
  const c10::intrusive_ptr<Options>& options() const { return options_; }
  bool uses_shared_memory() const { return transport_->uses_shared_memory(); }
  // "shared memory" (one host), "hierarchical" (hosts of several ranks) or "sockets".
  std::string transport_name() const { return transport_->name(); }
  // True once the watchdog aborted the group (TORCH_HCCL_ASYNC_ERROR_HANDLING=2).
  bool aborted() const;
  // Shared memory that reads the peers' device buffers directly (VNPU_SHARED_DEVICE_MEMORY).
  bool uses_zero_copy() const { return transport_->uses_zero_copy(); }
  // torch_npu's communicator name (get_hccl_comm_name / _set_hccl_comm_name,
  // which mc2 operators take to find their group). A group has one name: the
  // one set before it was first asked for, else "hccl_comm_<group id>_<rank>",
  // which the first ask fixes. Setting another name after that raises.
  std::string hccl_comm_name(int64_t rank);
  void set_hccl_comm_name(const std::string& name);
  // Whether `name` is this group's comm name for one of its ranks (the set
  // name, or the generated one with any rank).
  bool has_hccl_comm_name(const std::string& name);
  // Takes the group's next collective turn for an operator that
  // communicates from inside a compute-stream task (Note [Collectives
  // inside a compute-stream task] in csrc/core/comm_lease.h). `op` names it
  // in the flight recorder and the watchdog's messages (a string literal).
  std::shared_ptr<CommLease> lease(const char* op);

  // torch_npu's _group_start / _group_end (HCCL's HcclGroupStart/End): the
  // collectives and point-to-point operations issued between them complete
  // together, at the group's end. They are issued as they come (vNPU's sends
  // and recvs never block their issue, so any order within a group is
  // safe). Groups nest; the outermost end completes them.
  void group_start();
  void group_end();
  // torch_npu's batch_isend_irecv: the sends ("isend") and receives
  // ("irecv") issued between group_start and group_end; returns the last
  // one's work, which completes with the group.
  c10::intrusive_ptr<c10d::Work> batch_isend_irecv(std::vector<std::string>& op_type,
                                                   std::vector<at::Tensor>& tensors,
                                                   std::vector<int64_t> remote_rank_list) override;

  bool supportsCoalescing() const override { return false; }
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // The communication stream of `device` (made on first use), and the one
  // point-to-point operations wait on (so a blocked recv never holds up the
  // posting of the sends and recvs queued after it).
  c10::Stream comm_stream(c10::DeviceIndex device);
  c10::Stream p2p_wait_stream(c10::DeviceIndex device);
  // Whether this rank sent to or received from `peer` (torch_npu reports no
  // point-to-point stream for a peer before that: get_p2p_stream_id is -1).
  bool exchanged_with(int peer) const;

 private:
  // Queues `body` on the communication stream of the tensors' device after
  // the current stream's work; `outputs` are what it writes.
  template <typename Body>
  c10::intrusive_ptr<c10d::Work> enqueue(const char* name, c10d::OpType type, std::vector<at::Tensor> inputs,
                                         std::vector<at::Tensor> outputs, Body&& body);
  // A point-to-point operation: `post` (on the communication stream) starts
  // it without waiting, `finish` (on the p2p wait stream) waits for it.
  template <typename Post, typename Finish>
  c10::intrusive_ptr<c10d::Work> enqueue_p2p(const char* name, c10d::OpType type, std::vector<at::Tensor> inputs,
                                             std::vector<at::Tensor> outputs, Post&& post, Finish&& finish);

  // Small collectives with nothing queued before them run on the caller
  // (Note [Small collectives on idle streams run on the caller]).
  static constexpr size_t kOnCallerMaxBytes = 64 << 10;
  bool runs_on_caller(const std::vector<at::Tensor>& tensors, const c10::Stream& current,
                      const c10::Stream& comm);
  bool p2p_idle() const;
  // Orders a collective about to be queued on `comm` after the group's
  // previous one, when that one went to another device's communication
  // stream (Note [A group's collectives run in issue order]). Under issue_mutex_.
  void after_previous_collective(const c10::Stream& comm);
  // The group's key in the status files (status_save.h), for a collective on `device`.
  std::shared_ptr<const StatusKey> status_key(c10::DeviceIndex device);
  // Notes a work issued inside a group (group_start) and returns it.
  c10::intrusive_ptr<c10d::Work> grouped(c10::intrusive_ptr<WorkHCCL> work, c10::DeviceIndex device, bool is_p2p);
  void note_p2p_peer(int peer);  // for exchanged_with

  c10::intrusive_ptr<Options> options_;
  const HcclCommConfig comm_config_;      // read from options_->hccl_config when the group is made
  std::shared_ptr<Watchdog> watchdog_;    // shared with the queued collectives
  const uint64_t trace_pg_id_;            // the group's number in the flight recorder (0, 1, ... per process)
  const std::string trace_pg_name_;       // its name there, torch_npu's "group_name_<group id>"
  std::shared_ptr<Transport> transport_;  // shared with the queued collectives; never null
  CommCreation comm_creation_;            // how the transport was made, for the log (sub_comm.h)
  std::map<c10::DeviceIndex, c10::Stream> comm_streams_;
  std::map<c10::DeviceIndex, c10::Stream> p2p_wait_streams_;
  uint64_t seq_ = 0;            // guarded by issue_mutex_
  std::optional<c10::Stream> previous_comm_;  // the last collective's stream; guarded by issue_mutex_
  std::string comm_name_;       // set or fixed name; guarded by mutex_ (empty: neither yet)
  bool user_named_ = false;     // comm_name_ came from set_hccl_comm_name; guarded by mutex_
  std::set<int> p2p_peers_;     // ranks sent to or received from; guarded by mutex_
  struct GroupedWork {
    c10::intrusive_ptr<WorkHCCL> work;
    c10::DeviceIndex device;
    bool is_p2p;
  };
  std::shared_ptr<const StatusKey> status_key_;  // guarded by mutex_
  int group_depth_ = 0;                   // open _group_start()s; guarded by mutex_
  std::vector<GroupedWork> group_works_;  // issued in the open group; guarded by mutex_
  mutable std::mutex mutex_;    // the stream maps, comm_name_, the open group
  std::mutex issue_mutex_;      // one collective issued at a time (enqueue)
};

// Adds and removes a group from those lease_comm() finds by comm name
// (comm_leases.cpp); the group's constructor and destructor call them.
void register_leasable_group(ProcessGroupHCCL* group);
void unregister_leasable_group(ProcessGroupHCCL* group);

}  // namespace torch_npu
