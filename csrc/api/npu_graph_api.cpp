// c10_npu::NPUGraph (NPUGraph.h) over the adaptor's NPU graphs
// (csrc/graph/npu_graph.h), the ones torch.npu.NPUGraph uses.
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"
#include "csrc/graph/npu_graph.h"
#include "torch_npu/csrc/core/npu/NPUGraph.h"

namespace c10_npu {

struct NPUGraph::State {
  torch_npu::NpuGraph graph;
};

MempoolId_t graph_pool_handle() { return torch_npu::graph_pool_handle(); }

NPUGraph::NPUGraph() : state_(std::make_unique<State>()) {}

NPUGraph::~NPUGraph() = default;

void NPUGraph::capture_begin(MempoolId_t pool, const char* capture_mode) {
  TORCH_CHECK(!torch_npu::is_external_stream(torch_npu::current_stream(-1)),
              "NPUGraph::capture_begin: capturing an external stream (getStreamFromExternal) is not supported; "
              "capture on a stream from the pool",
              torch_npu::error_suffix(torch_npu::SubModule::kPTA, torch_npu::ErrCode::kNotSupport));
  std::optional<torch_npu::MempoolId> id;
  if (pool.first != 0 || pool.second != 0) id = pool;
  state_->graph.capture_begin(id, capture_mode == nullptr ? "global" : capture_mode);
}

void NPUGraph::capture_end() { state_->graph.capture_end(); }

void NPUGraph::replay() { state_->graph.replay(); }

void NPUGraph::reset() { state_->graph.reset(); }

MempoolId_t NPUGraph::pool() { return state_->graph.pool(); }

}  // namespace c10_npu
