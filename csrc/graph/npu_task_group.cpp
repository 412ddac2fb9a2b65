#include "csrc/graph/npu_task_group.h"

#include <c10/util/Exception.h>

#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <vnpu/graph.h>
#include <vnpu/stream.h>

#include "csrc/core/npu_error.h"
#include "csrc/core/npu_mem_pool.h"
#include "csrc/core/npu_stream.h"

namespace torch_npu {
namespace {

// An update underway on a stream: its handle and the graph its work is
// captured into.
struct PendingUpdate {
  TaskGroupHandle handle;
  std::shared_ptr<vnpu::Graph> work;
};

struct Registry {
  std::mutex mutex;
  // The groups' pools, by graph and group index.
  std::unordered_map<const vnpu::Graph*, std::unordered_map<std::size_t, MempoolId>> pools;
  std::unordered_map<const vnpu::Stream*, PendingUpdate> updates;
};

Registry& registry() {
  static Registry* r = new Registry();  // leaked: streams may outlive static destruction
  return *r;
}

std::shared_ptr<vnpu::Graph> capture_graph_of(vnpu::Stream& stream, const char* fn) {
  std::shared_ptr<vnpu::Graph> graph = stream.capture_graph();
  NPU_CHECK_WITH(Error, ErrCode::kParam, graph != nullptr, fn,
                 ": the stream is not capturing a graph. Call it between NPUGraph.capture_begin and "
                 "capture_end (inside `with torch.npu.graph(g):`), on the capturing stream.");
  return graph;
}

// The pool of `handle`'s group, made at its first update.
MempoolId group_pool(const TaskGroupHandle& handle, const vnpu::Graph* graph) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& pools = r.pools[graph];
  auto it = pools.find(handle.index);
  if (it == pools.end()) it = pools.emplace(handle.index, create_pool(handle.device, /*for_graph=*/true)).first;
  return it->second;
}

}  // namespace

void graph_task_group_begin(const c10::Stream& stream) {
  vnpu::Stream& runtime = runtime_stream(stream);
  auto graph = capture_graph_of(runtime, "graph_task_group_begin");
  with_torch_errors([&] { graph->begin_task_group(); });
}

TaskGroupHandle graph_task_group_end(const c10::Stream& stream) {
  vnpu::Stream& runtime = runtime_stream(stream);
  auto graph = capture_graph_of(runtime, "graph_task_group_end");
  TaskGroupHandle handle;
  handle.index = with_torch_errors([&] { return graph->end_task_group(); });
  handle.graph = graph;
  handle.device = stream.device_index();
  return handle;
}

void graph_task_update_begin(const c10::Stream& stream, const TaskGroupHandle& handle) {
  std::shared_ptr<vnpu::Graph> graph = handle.graph.lock();
  NPU_CHECK_WITH(Error, ErrCode::kParam, graph != nullptr,
                 "graph_task_update_begin: the graph this task group was captured in has been reset or "
                 "destroyed.");
  NPU_CHECK_WITH(ValueError, ErrCode::kParam, stream.device_index() == handle.device,
                 "graph_task_update_begin: the stream is on npu:", static_cast<int>(stream.device_index()),
                 ", the task group's graph on npu:", static_cast<int>(handle.device));
  vnpu::Stream& runtime = runtime_stream(stream);
  NPU_CHECK_WITH(Error, ErrCode::kParam, !runtime.capturing(),
                 "graph_task_update_begin: the stream is capturing (a graph, or another task update). Update "
                 "on a stream outside the capture, and end each update before beginning the next.");
  const MempoolId pool = group_pool(handle, graph.get());
  auto work = std::make_shared<vnpu::Graph>();
  begin_capture_to_pool(runtime, pool);
  try {
    with_torch_errors([&] { runtime.begin_capture(work); });
  } catch (...) {
    end_capture_to_pool(runtime);
    throw;
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.updates[&runtime] = PendingUpdate{handle, std::move(work)};
}

void graph_task_update_end(const c10::Stream& stream) {
  vnpu::Stream& runtime = runtime_stream(stream);
  PendingUpdate update;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.updates.find(&runtime);
    NPU_CHECK_WITH(Error, ErrCode::kParam, it != r.updates.end(),
                   "graph_task_update_end: no task update is underway on this stream; call "
                   "graph_task_update_begin(stream, handle) first.");
    update = std::move(it->second);
    r.updates.erase(it);
  }
  with_torch_errors([&] { runtime.end_capture(); });
  end_capture_to_pool(runtime);
  // The swap, in stream order. The graph may be reset meanwhile: then the
  // work is dropped.
  launch_host_task(stream, "graph_task_update",
                   [graph = update.handle.graph, index = update.handle.index, work = update.work] {
                     if (auto g = graph.lock()) g->update_task_group(index, *work);
                   });
}

void release_task_group_pools(const vnpu::Graph* graph) {
  std::unordered_map<std::size_t, MempoolId> pools;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.pools.find(graph);
    if (it == r.pools.end()) return;
    pools = std::move(it->second);
    r.pools.erase(it);
  }
  for (const auto& [index, pool] : pools) release_pool(pool);
}

}  // namespace torch_npu
