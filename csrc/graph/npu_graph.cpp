#include "csrc/graph/npu_graph.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <utility>

#include <vnpu/graph.h>
#include <vnpu/stream.h>

#include "csrc/core/host_allocator.h"
#include "csrc/core/npu_capture.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"
#include "csrc/graph/npu_task_group.h"

namespace torch_npu {
namespace {

// A fresh id for the host allocator's pool of one capture. Not the device
// pool's id: graphs may share that one (graph_pool_handle) and capture with
// it again after a reset, while torch's host allocator keeps a released pool
// until host_empty_cache() frees its blocks and refuses to reopen it.
c10::MempoolId_t new_host_pool_id() {
  static std::atomic<c10::CaptureId_t> next{1};
  return {0, next.fetch_add(1, std::memory_order_relaxed)};
}

}  // namespace

NpuGraph::~NpuGraph() {
  try {
    reset();
  } catch (...) {  // a destructor must not throw; reset() reports to explicit callers
  }
}

void NpuGraph::capture_begin(std::optional<MempoolId> pool, const std::string& capture_error_mode) {
  const CaptureErrorMode mode = parse_capture_error_mode(capture_error_mode);
  NPU_CHECK_WITH(Error, ErrCode::kParam, !graph_,
                 "This NPUGraph instance already owns a captured graph. To capture a new graph, create a new "
                 "instance.");
  const c10::DeviceIndex device = current_device();
  const c10::Stream stream = current_stream(device);
  NPU_CHECK_WITH(Error, ErrCode::kParam, stream != default_stream(device),
                 "NPU graphs must be captured on a non-default stream. (However, after capture, it's ok to "
                 "replay them on the default stream.)");
  vnpu::Stream& runtime = runtime_stream(stream);
  if (pool.has_value()) {
    NPU_CHECK_WITH(ValueError, ErrCode::kParam, pool_device(*pool) == device,
                   "the memory pool belongs to npu:", pool_device(*pool), ", the capture runs on npu:", device);
    retain_pool(*pool);
    pool_ = pool;
  } else {
    pool_ = create_pool(device, /*for_graph=*/true);
  }
  auto graph = std::make_shared<vnpu::Graph>();
  begin_capture_to_pool(runtime, *pool_);
  at::HostAllocator* host = pinned_host_caching_allocator();
  const c10::MempoolId_t host_pool = new_host_pool_id();
  // Pinned memory that pin_memory() allocates on the capturing stream comes
  // from a host pool of the graph's own, isolated until reset()
  // (csrc/core/host_allocator.h), as CUDA graphs do.
  host->begin_allocate_to_pool(host_pool,
                               [capturing = &runtime](c10::Stream s) { return &runtime_stream(s) == capturing; });
  try {
    with_torch_errors([&] { runtime.begin_capture(graph); });
  } catch (...) {
    host->end_allocate_to_pool(host_pool);
    host->release_pool(host_pool);
    end_capture_to_pool(runtime);
    release_pool(*pool_);
    pool_.reset();
    throw;
  }
  host_pool_ = host_pool;
  rng_ = std::make_shared<CaptureRng>();
  register_capture(runtime, graph, *pool_, rng_, mode);
  device_ = device;
  capture_stream_ = &runtime;
  graph_ = std::move(graph);
}

void NpuGraph::begin_capture_to_if_node(const at::Tensor& predicate) {
  NPU_CHECK_WITH(Error, ErrCode::kParam, capture_stream_ != nullptr,
                 "begin_capture_to_if_node: the NPUGraph is not capturing; call it inside torch.npu.graph(...).");
  NPU_CHECK_WITH(Error, ErrCode::kParam,
                 predicate.device().type() == c10::DeviceType::PrivateUse1 && predicate.numel() == 1 &&
                     predicate.scalar_type() == at::kBool,
                 "Conditions must be bool tensors of one element on an npu device to use conditional nodes in npu "
                 "graphs; got ", predicate.scalar_type(), " ", predicate.sizes(), " on ", predicate.device());
  predicates_.push_back(predicate);
  graph_->begin_conditional(static_cast<const unsigned char*>(predicate.const_data_ptr()));
}

void NpuGraph::end_capture_to_conditional_node() {
  NPU_CHECK_WITH(Error, ErrCode::kParam, capture_stream_ != nullptr,
                 "end_capture_to_conditional_node: the NPUGraph is not capturing.");
  with_torch_errors([&] { graph_->end_conditional(); });
}

void NpuGraph::capture_end() {
  NPU_CHECK_WITH(Error, ErrCode::kParam, capture_stream_ != nullptr,
                 "NPUGraph::capture_end was called without a preceding capture_begin.");
  vnpu::Stream& current = current_runtime_stream(device_);
  NPU_CHECK_WITH(Error, ErrCode::kParam, &current == capture_stream_, "Capture must end on the same stream it "
                 "began on.");
  try {
    NPU_CHECK_WITH(Error, ErrCode::kParam, graph_->open_conditionals() == 0,
                   "NPUGraph::capture_end: a conditional node is still being captured; call "
                   "end_capture_to_conditional_node for each begin_capture_to_if_node first.");
    // Ends the capture on the streams it forked onto; refuses unjoined work.
    unregister_capture(*capture_stream_, /*check_joined=*/true);
  } catch (...) {
    reset();  // the capture is invalid: drop it
    throw;
  }
  with_torch_errors([&] { capture_stream_->end_capture(); });
  end_capture_to_pool(*capture_stream_);
  pinned_host_caching_allocator()->end_allocate_to_pool(host_pool_);
  capture_stream_ = nullptr;
  if (graph_->size() == 0) {
    TORCH_WARN("The NPU Graph is empty. This usually means that the graph was attempted to be captured on "
               "wrong device or stream.");
  }
}

void NpuGraph::replay() {
  NPU_CHECK_WITH(Error, ErrCode::kParam, graph_ && capture_stream_ == nullptr,
                 "Called NPUGraph::replay without a preceding successful capture.");
  check_not_forked();
  vnpu::Stream& stream = current_runtime_stream(device_);
  // Note [Random ops in NPU graphs]: the generators' states for this replay
  // are taken now, in replay order, and travel with its task.
  auto rng_state = rng_->take_replay_state();
  // A graph that waits for an external event depends on the host while it
  // is queued (note_host_dependent_work, npu_stream.h).
  const bool host_dependent = graph_->waits_on_host();
  if (host_dependent) note_host_dependent_work(+1);
  const uint64_t seq = with_torch_errors([&] {
    try {
      return stream.enqueue(vnpu::TaskKind::kGraph, "graph_replay",
                            [graph = graph_, state = std::move(rng_state), host_dependent] {
                              struct Done {
                                bool on;
                                ~Done() { if (on) note_host_dependent_work(-1); }
                              } done{host_dependent};
                              ReplayRngScope scope(&state);
                              graph->run();
                            });
    } catch (...) {
      if (host_dependent) note_host_dependent_work(-1);
      throw;
    }
  });
  for (auto& [s, last] : replays_) {
    if (s == &stream) {
      last = seq;
      return;
    }
  }
  replays_.emplace_back(&stream, seq);
}

void NpuGraph::reset() {
  if (capture_stream_ != nullptr) {  // abandoned mid-capture (the capture raised)
    unregister_capture(*capture_stream_, /*check_joined=*/false);
    if (capture_stream_->capturing()) capture_stream_->end_capture();
    end_capture_to_pool(*capture_stream_);
    pinned_host_caching_allocator()->end_allocate_to_pool(host_pool_);
    capture_stream_ = nullptr;
  }
  // Queued replays read the pool's memory: let them finish first.
  for (const auto& [stream, seq] : replays_) with_torch_errors([&] { stream->wait_completed(seq); });
  replays_.clear();
  if (graph_) release_task_group_pools(graph_.get());
  graph_.reset();
  predicates_.clear();
  rng_.reset();
  if (pool_.has_value()) {  // the pools capture_begin took, device and host
    pinned_host_caching_allocator()->release_pool(std::exchange(host_pool_, c10::MempoolId_t{0, 0}));
    release_pool(*pool_);
  }
  pool_.reset();
}

MempoolId NpuGraph::pool() const {
  NPU_CHECK_WITH(Error, ErrCode::kParam, pool_.has_value(),
                 "Called NPUGraph::pool() without a preceding successful capture.");
  return *pool_;
}

size_t NpuGraph::num_tasks() const { return graph_ ? graph_->size() : 0; }

std::vector<std::string> NpuGraph::task_names() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < num_tasks(); ++i) names.emplace_back(graph_->task_name(i));
  return names;
}

bool is_current_stream_capturing() {
  if (!is_initialized()) return false;
  return current_runtime_stream(current_device()).capturing();
}

MempoolId graph_pool_handle() {
  // A pool nobody uses yet: the graphs given it retain it, and it empties
  // when the last of them is reset.
  const MempoolId id = create_pool(current_device(), /*for_graph=*/false);
  release_pool(id);
  return id;
}

}  // namespace torch_npu
