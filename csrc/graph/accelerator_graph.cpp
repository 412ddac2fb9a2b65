#include "csrc/graph/accelerator_graph.h"

#include <ATen/core/GraphImplInterface.h>
#include <c10/core/DeviceType.h>

#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "csrc/graph/npu_graph.h"

namespace torch_npu {
namespace {

const char* mode_name(at::GraphCaptureMode mode) {
  switch (mode) {
    case at::GraphCaptureMode::Global: return "global";
    case at::GraphCaptureMode::ThreadLocal: return "thread_local";
    case at::GraphCaptureMode::Relaxed: return "relaxed";
    case at::GraphCaptureMode::Default: break;
  }
  return "global";  // torch.npu.graph's default, as CUDA's
}

// torch.accelerator.Graph's calls, each forwarded to an NpuGraph (the graph
// torch.npu.NPUGraph wraps): the same capture, pool and replay semantics.
class NpuAcceleratorGraph final : public at::GraphImplInterface {
 public:
  explicit NpuAcceleratorGraph(const at::GraphImplArgs& args) : keep_graph_(args.keep_graph) {}

  void capture_begin(at::MempoolId_t pool, at::GraphCaptureMode mode) override {
    std::optional<MempoolId> id;
    if (pool.first != 0 || pool.second != 0) id = MempoolId{pool.first, pool.second};  // {0, 0}: a pool of its own
    graph_.capture_begin(id, mode_name(mode));
  }
  void capture_end() override { graph_.capture_end(); }
  // A captured NPU graph is replayable as soon as the capture ends.
  void instantiate() override {
    TORCH_CHECK(graph_.num_tasks() > 0 || keep_graph_,
                "Called NPUGraph::instantiate without a preceding successful capture.");
  }
  void replay() override { graph_.replay(); }
  void reset() override { graph_.reset(); }
  at::MempoolId_t pool() const override {
    const MempoolId id = graph_.pool();
    return {id.first, id.second};
  }
  // The captured task list is always kept: debug_dump needs nothing turned on.
  void enable_debug_mode() override {}
  void debug_dump(const std::string& path) override {
    std::ofstream out(path);
    TORCH_CHECK(out.good(), "NPUGraph debug_dump: cannot write ", path);
    out << "{\"tasks\": [";
    const auto names = graph_.task_names();
    for (size_t i = 0; i < names.size(); ++i) out << (i ? ", " : "") << '"' << names[i] << '"';
    out << "]}\n";
  }

 private:
  NpuGraph graph_;
  bool keep_graph_;
};

}  // namespace

void register_accelerator_graph() {
  const std::string key = c10::DeviceTypeName(c10::DeviceType::PrivateUse1, /*lower_case=*/false);
  if (at::GraphImplRegistry()->Has(key)) return;
  at::GraphImplRegistry()->Register(
      key, [](const at::GraphImplArgs& args) -> std::unique_ptr<at::GraphImplInterface> {
        return std::make_unique<NpuAcceleratorGraph>(args);
      });
}

}  // namespace torch_npu
