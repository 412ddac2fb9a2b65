// torch.npu.NPUGraph: capture of the work launched on a stream, replayed as
// one task (vnpu::Graph, runtime/include/vnpu/graph.h), with CUDA graphs'
// semantics:
//   - capture_begin on a non-default stream: from then on that stream's
//     launches are recorded, not run; its allocations come from the graph's
//     private pool (npu_mem_pool.h), or a pool shared with other graphs;
//   - capture_end returns the stream to normal;
//   - replay enqueues the recorded work on the current stream, with the
//     arguments of capture time (same addresses: the graph's static inputs
//     and outputs), at the host cost of one launch;
//   - reset waits for queued replays, then frees the graph and releases its
//     pool.
// Random ops may be captured: each replay draws fresh numbers from the
// generators' state at that replay (Note [Random ops in NPU graphs],
// npu_generator.cpp).
// What cannot be captured raises the capture error (vnpu::ErrorCode::
// kStreamCapture): synchronizing ops, host copies, CPU fallbacks.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "csrc/core/npu_generator.h"
#include "csrc/core/npu_mem_pool.h"

namespace vnpu {
class Graph;
class Stream;
}  // namespace vnpu

namespace torch_npu {

class NpuGraph {
 public:
  NpuGraph() = default;
  ~NpuGraph();
  NpuGraph(const NpuGraph&) = delete;
  NpuGraph& operator=(const NpuGraph&) = delete;

  void capture_begin(std::optional<MempoolId> pool, const std::string& capture_error_mode);
  void capture_end();
  void replay();
  void reset();
  // The pool this graph allocates from (its own, or the one it shares).
  MempoolId pool() const;
  // Recorded tasks, and their names in order (debug_dump).
  size_t num_tasks() const;
  std::vector<std::string> task_names() const;
  bool capturing() const { return capture_stream_ != nullptr; }
  // Conditional nodes (vnpu::Graph::begin_conditional): the work captured
  // until the matching end runs at each replay only when `predicate` (a
  // one-element bool npu tensor, kept alive by the graph) is true then.
  void begin_capture_to_if_node(const at::Tensor& predicate);
  void end_capture_to_conditional_node();

 private:
  c10::DeviceIndex device_ = -1;
  vnpu::Stream* capture_stream_ = nullptr;
  std::shared_ptr<vnpu::Graph> graph_;  // set from capture_begin on
  std::shared_ptr<CaptureRng> rng_;     // the generators the captured random ops draw from
  std::optional<MempoolId> pool_;
  c10::MempoolId_t host_pool_{0, 0};  // the host allocator's pool for pin_memory() in the capture (set with pool_)
  std::vector<std::pair<vnpu::Stream*, uint64_t>> replays_;  // the last replay per stream
  std::vector<at::Tensor> predicates_;  // the conditional nodes' predicates, read at each replay
};

// True when the calling thread's current stream captures a graph.
bool is_current_stream_capturing();

// An id for a pool graphs may share (torch.npu.graph_pool_handle()).
MempoolId graph_pool_handle();

}  // namespace torch_npu
