// Transport: how the ranks of one ProcessGroupHCCL exchange a collective's bytes.
//
// ProcessGroupHCCL applies HCCL's rules and stages the tensors (stage 2:
// contiguous CPU tensors over device memory, or copies of it); its transport
// moves those bytes between the ranks. The transport is chosen once, when the
// group connects (connect_transport), from where the ranks run:
//
//   ShmTransport           every rank on one host: vnpu::hccl::ShmGroup
//   HierarchicalTransport  several hosts, some of several ranks: shared memory
//                          inside a host, sockets among the hosts' leaders
//   SocketTransport        anything else: ProcessGroupGloo over the whole group
//
// Every transport holds the whole group's sockets (a ProcessGroupGloo the
// bindings make, SocketGroupFactory). What shared memory cannot do runs
// there, inside the transport: the shared-memory transports derive from
// SocketTransport and override the collectives they do themselves.
//
// Ownership: the group owns its transport and shares it with its queued
// collectives, which may outlive the group.
// Thread-safety: the group calls the collectives one at a time, in issue
// order (on its communication stream, or on the caller when that stream is
// idle); only the wait for a send or recv (the Work they return) runs beside
// them. Every call blocks until this rank's part is done and raises on a
// failure (a peer that timed out or died, ranks that disagree).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch_npu {

class Transport {
 public:
  // How long shared memory waits for its peers: the group's collective
  // timeout when the collective was issued. Sockets keep the timeout their
  // ProcessGroupGloo was made with.
  using Timeout = std::chrono::milliseconds;

  virtual ~Transport() = default;

  // "shared memory", "hierarchical" or "sockets" (ProcessGroupHCCL._transport).
  virtual std::string name() const = 0;
  // Whether this rank exchanges through shared memory, and whether that
  // reads the peers' device buffers directly (VNPU_SHARED_DEVICE_MEMORY).
  virtual bool uses_shared_memory() const = 0;
  virtual bool uses_zero_copy() const = 0;
  // Whether this rank's next collective finds every peer there within a
  // few microseconds (ProcessGroupHCCL runs a small collective on the
  // caller only then: issuing never waits long for a peer). Shared memory
  // can tell (ShmGroup::meet_peers); sockets cannot, unless the group has
  // this rank alone. Called between collectives.
  virtual bool meet_peers() = 0;

  // The tensors below are contiguous CPU tensors; reductions are SUM,
  // PRODUCT, MIN or MAX (ProcessGroupHCCL maps HCCL's other ops onto these).

  // With TORCH_HCCL_DESYNC_DEBUG=1, these four first check that every rank
  // runs the same collective on the same dtype and element count; a mismatch
  // raises on every rank.

  // From opts.rootRank; the sockets also take the rest of `opts` (its timeout).
  virtual void broadcast(const at::Tensor& tensor, const c10d::BroadcastOptions& opts, Timeout timeout) = 0;
  virtual void allreduce(const at::Tensor& tensor, const c10d::ReduceOp& op, Timeout timeout) = 0;
  // `output` holds every rank's `input`, rank after rank.
  virtual void allgather_into_tensor(const at::Tensor& output, const at::Tensor& input, Timeout timeout) = 0;
  // `input` holds size blocks of output's size; rank r gets the reduction of every rank's r-th block.
  virtual void reduce_scatter_tensor(const at::Tensor& output, const at::Tensor& input, const c10d::ReduceOp& op,
                                     Timeout timeout) = 0;

  // The other collectives, unchecked. The coalesced ones take one tensor of
  // the list per call, in order; they are not the single-tensor forms above
  // because no transport runs them over shared memory (nor checks them) yet.
  virtual void allreduce_coalesced(const at::Tensor& tensor, const c10d::ReduceOp& op) = 0;
  virtual void allgather_into_tensor_coalesced(const at::Tensor& output, const at::Tensor& input) = 0;
  virtual void reduce_scatter_tensor_coalesced(const at::Tensor& output, const at::Tensor& input,
                                               const c10d::ReduceOp& op) = 0;
  // Only the root's `tensor` receives the result.
  virtual void reduce(const at::Tensor& tensor, const c10d::ReduceOp& op, int root) = 0;
  // outputs[r] receives rank r's `input`.
  virtual void allgather(const std::vector<at::Tensor>& outputs, const at::Tensor& input) = 0;
  // inputs (the root's; empty elsewhere): one per rank.
  virtual void scatter(const at::Tensor& output, const std::vector<at::Tensor>& inputs,
                       const c10d::ScatterOptions& opts) = 0;
  // inputs: one per rank; `output` receives the reduction of every rank's inputs[rank].
  virtual void reduce_scatter(const at::Tensor& output, const std::vector<at::Tensor>& inputs,
                              const c10d::ReduceOp& op) = 0;
  // Splits as c10d's all_to_all_single (empty: equal).
  virtual void alltoall_base(const at::Tensor& output, const at::Tensor& input,
                             const std::vector<int64_t>& output_splits, const std::vector<int64_t>& input_splits,
                             const c10d::AllToAllOptions& opts) = 0;
  virtual void alltoall(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                        const c10d::AllToAllOptions& opts) = 0;

  // Point to point: these start the transfer and do not block; the caller
  // keeps `tensor` alive until the returned Work's wait() has returned.
  virtual c10::intrusive_ptr<c10d::Work> send(const at::Tensor& tensor, int dst_rank, int tag) = 0;
  virtual c10::intrusive_ptr<c10d::Work> recv(const at::Tensor& tensor, int src_rank, int tag) = 0;

 protected:
  // TORCH_HCCL_DESYNC_DEBUG: what a rank is about to run (op, dtype, element
  // count) in 64 bits, and the error when two ranks differ.
  static uint64_t signature_of(c10d::OpType type, const at::Tensor& t);
  [[noreturn]] static void raise_mismatch(int rank, uint64_t mine, int other, uint64_t theirs);
};

// Makes a ProcessGroupGloo over a prefix of the group's store for `size`
// ranks: the whole group's ("hccl_transport/"), and the hosts' leaders'
// ("hccl_leaders/") when the group spans hosts, with the timeout of its
// operations. The bindings provide it (they own Python; this library
// includes no gloo header). Only called while the group connects.
using SocketGroupFactory = std::function<c10::intrusive_ptr<c10d::Backend>(
    const std::string& prefix, int rank, int size, std::chrono::milliseconds timeout)>;

// Where the group's ranks run, as connect_transport reads it.
struct TransportConfig {
  // This rank's host ("" for none: sockets only). Ranks of one host share memory.
  std::string host_id;
  size_t shm_slot_bytes = 0;      // each rank's shared-memory slot
  std::chrono::milliseconds timeout{0};  // to connect the shared memory
  std::chrono::milliseconds sockets_timeout{0};  // of the sockets' operations (the collectives' timeout)
};

// Collective over the group (every rank calls it): every rank posts its host
// to `store` and reads everyone's, so all pick the same kind of transport.
// Shared memory needs a host of two ranks or more and none beyond what a
// segment holds; if any rank fails to attach, all use sockets (with a warning
// on the rank that failed). Blocks until the peers have posted.
//
// `rank_hosts`, when not null, is each group rank's host: given (not empty)
// by a group that derives them from the world group's (sub_comm.h), the
// ranks' hosts are not read from the store (each rank still posts its own,
// so a peer that does not derive finds it); left empty, it is filled with
// the hosts read (none when the group connects without shared memory).
std::shared_ptr<Transport> connect_transport(c10d::Store& store, int rank, int size, const TransportConfig& config,
                                             const SocketGroupFactory& make_sockets,
                                             std::vector<std::string>* rank_hosts = nullptr);

}  // namespace torch_npu
