// A C++ extension written against torch_npu's public C++ API, as an Ascend
// user writes one: tests/test_cpp_extension.py builds it with NpuExtension
// (setup.py) and with torch.utils.cpp_extension.load (JIT), then checks each
// function against the same work done from Python.
#include <atomic>
#include <chrono>
#include <thread>

#include <torch/extension.h>

#include "third_party/acl/inc/acl/acl.h"
#include "torch_npu/csrc/aten/NPUGeneratorImpl.h"
#include "torch_npu/csrc/aten/NPUNativeFunctions.h"
#include "torch_npu/csrc/aten/common/from_blob.h"
#include "torch_npu/csrc/core/npu/NPUCachingAllocator.h"
#include "torch_npu/csrc/core/npu/NPUEvent.h"
#include "torch_npu/csrc/core/npu/NPUException.h"
#include "torch_npu/csrc/core/npu/NPUFormat.h"
#include "torch_npu/csrc/core/npu/NPUFunctions.h"
#include "torch_npu/csrc/core/npu/NPUGraph.h"
#include "torch_npu/csrc/core/npu/NPUGuard.h"
#include "torch_npu/csrc/core/npu/NPUHooksInterface.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "torch_npu/csrc/core/npu/SecondaryStreamGuard.h"
#include "torch_npu/csrc/framework/OpCommand.h"
#include "torch_npu/csrc/framework/OpHook.h"
#include "torch_npu/csrc/inductor/aoti_torch/generated/c_shim_npu.h"
#include "torch_npu/csrc/libs/init_npu.h"
#include "third_party/op-plugin/op_plugin/include/ops.h"
#include <torch/csrc/inductor/aoti_torch/utils.h>

namespace {

// x * scale + bias on the current stream, written as an extension would:
// the math as host work queued with OpCommand::RunOpApi, ordered with the
// kernels before and after it.
at::Tensor scaled_add(const at::Tensor& x, double scale, const at::Tensor& bias) {
  TORCH_CHECK(x.device().is_privateuseone() && bias.device() == x.device(), "scaled_add expects npu tensors on one device");
  TORCH_CHECK(x.scalar_type() == at::kFloat && bias.scalar_type() == at::kFloat, "scaled_add expects float32");
  TORCH_CHECK(x.sizes() == bias.sizes(), "scaled_add expects equal shapes");
  c10_npu::OptionalNPUGuard guard(x.device());
  at::Tensor xc = x.contiguous();
  at::Tensor bc = bias.contiguous();
  at::Tensor out = at::empty_like(xc);
  at_npu::native::OpCommand::RunOpApi("scaled_add", [xc, bc, out, scale]() -> int {
    const float* a = xc.data_ptr<float>();
    const float* b = bc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = a[i] * static_cast<float>(scale) + b[i];
    return 0;
  });
  return out;
}

at::Tensor scaled_add_meta(const at::Tensor& x, double scale, const at::Tensor& bias) { return at::empty_like(x); }

// A kernel that fails: its status reaches the next synchronizing call.
void failing_op() {
  at_npu::native::OpCommand::RunOpApi("failing_op", []() -> int { return 7; });
}

// Holds the current stream for `ms` milliseconds (work queued after it waits).
void sleep_on_stream(int64_t ms) {
  at_npu::native::OpCommand::RunOpApi("sleep_on_stream", [ms]() -> int {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return 0;
  });
}

std::atomic<int> g_callbacks{0};
void count_callback(void* data) { g_callbacks.fetch_add(*static_cast<int*>(data)); }

// aclrtLaunchCallback on the current stream: runs in stream order.
int64_t callback_after_sleep(int64_t ms) {
  static int increment = 1;
  g_callbacks = 0;
  sleep_on_stream(ms);
  NPU_CHECK_ERROR(aclrtLaunchCallback(count_callback, &increment, ACL_CALLBACK_BLOCK,
                                      c10_npu::getCurrentNPUStream().stream()));
  const int before_sync = g_callbacks.load();
  c10_npu::getCurrentNPUStream().synchronize();
  return before_sync * 10 + g_callbacks.load();  // 1 when it waited for the sleep
}

// An ACL stream wrapped as an NPUStream: torch ops run on it while current.
bool external_stream_roundtrip() {
  aclrtStream acl_stream = nullptr;
  NPU_CHECK_ERROR(aclrtCreateStream(&acl_stream));
  c10_npu::NPUStream ext = c10_npu::getStreamFromExternal(acl_stream, 0);
  bool ok = (static_cast<uint64_t>(ext.id()) & (1ULL << 30)) != 0 && ext.stream() == acl_stream &&
            c10_npu::getStreamFromExternal(acl_stream, 0) == ext;
  c10_npu::setCurrentNPUStream(ext);
  auto a = at::ones({64}, at::TensorOptions().device(at::Device("npu:0")));
  auto b = (a * 3).sum();
  ok = ok && c10_npu::getCurrentNPUStream(0) == ext;
  NPU_CHECK_ERROR(aclrtSynchronizeStream(acl_stream));
  ok = ok && b.item<float>() == 192.0f;
  bool query_refused = false;
  try {
    ext.query();
  } catch (const c10::Error&) {
    query_refused = true;
  }
  c10_npu::NPUEvent event;
  bool record_refused = false;
  try {
    event.record(ext);
  } catch (const c10::Error&) {
    record_refused = true;
  }
  c10_npu::setCurrentNPUStream(c10_npu::getDefaultNPUStream(0));
  NPU_CHECK_ERROR(aclrtDestroyStream(acl_stream));
  return ok && query_refused && record_refused && aclrtDestroyStream(acl_stream) != ACL_SUCCESS;
}

// Device memory through ACL: H2D, D2D on a stream, D2H; returns the copy.
std::vector<float> acl_memory_roundtrip(std::vector<float> values) {
  const size_t bytes = values.size() * sizeof(float);
  void* d1 = nullptr;
  void* d2 = nullptr;
  NPU_CHECK_ERROR(aclrtMalloc(&d1, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  NPU_CHECK_ERROR(aclrtMalloc(&d2, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  NPU_CHECK_ERROR(aclrtMemcpy(d1, bytes, values.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
  aclrtStream stream = c10_npu::getCurrentNPUStream().stream();
  NPU_CHECK_ERROR(aclrtMemcpyAsync(d2, bytes, d1, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, stream));
  NPU_CHECK_ERROR(aclrtSynchronizeStream(stream));
  std::vector<float> out(values.size());
  NPU_CHECK_ERROR(aclrtMemcpy(out.data(), bytes, d2, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
  NPU_CHECK_ERROR(aclrtFree(d1));
  NPU_CHECK_ERROR(aclrtFree(d2));
  return out;
}

// The status and message of a copy that runs past its allocation.
std::tuple<int64_t, std::string> acl_bad_copy() {
  void* d = nullptr;
  NPU_CHECK_ERROR(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
  std::vector<char> host(128);
  const aclError status = aclrtMemcpy(d, 128, host.data(), 128, ACL_MEMCPY_HOST_TO_DEVICE);
  std::string message = aclGetRecentErrMsg();
  NPU_CHECK_ERROR(aclrtFree(d));
  return {status, message};
}

// A view of `base` made from its raw npu memory.
at::Tensor view_from_blob(const at::Tensor& base, int64_t offset, int64_t size) {
  return at_npu::native::from_blob(base.data_ptr(), {size}, {1}, offset, base.options());
}

std::vector<int64_t> storage_sizes(const at::Tensor& t) { return at_npu::native::get_npu_storage_sizes(t); }

int64_t device_stats_allocated(int64_t device) {
  return c10_npu::NPUCachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device))
      .allocated_bytes[0]
      .current;
}

double event_elapsed_ms() {
  c10_npu::NPUEvent start(ACL_EVENT_TIME_LINE);
  c10_npu::NPUEvent end(ACL_EVENT_TIME_LINE);
  auto stream = c10_npu::getCurrentNPUStream();
  start.record(stream);
  sleep_on_stream(20);
  end.record(stream);
  end.synchronize();
  return start.elapsed_time(end);
}

// Fills x on a side stream under SecondaryStreamGuard (after a sleep there),
// then reads it on the original stream: the guard's exit must order the read
// after the fill. Returns x + 1 and whether the original stream is current
// again.
std::tuple<at::Tensor, bool> secondary_stream_join(at::Tensor x) {
  const c10_npu::NPUStream main = c10_npu::getCurrentNPUStream();
  {
    c10_npu::SecondaryStreamGuard guard(c10_npu::getNPUStreamFromPool());
    sleep_on_stream(50);
    x.fill_(7);
  }
  return {x + 1, c10_npu::getCurrentNPUStream() == main};
}

// MindSpeed's dropout-mask recipe: (seed, offset) from the default npu
// generator as torch_npu's type (twice: the offset moves by 12 for 10
// draws), then the packed mask of numel elements from them.
std::tuple<std::vector<int64_t>, at::Tensor> philox_dropout_mask(const at::Tensor& like, int64_t numel, double p) {
  at::Generator gen = at_npu::detail::getDefaultNPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  auto* impl = at::check_generator<at_npu::NPUGeneratorImpl>(gen);
  const auto first = impl->philox_engine_inputs(10);
  const auto second = impl->philox_engine_inputs(10);
  at::Tensor mask = at_npu::native::npu_dropout_gen_mask(like, {numel}, p, static_cast<int64_t>(first.first),
                                                         static_cast<int64_t>(first.second), true, false);
  return {{static_cast<int64_t>(first.first), static_cast<int64_t>(first.second),
           static_cast<int64_t>(second.first), static_cast<int64_t>(second.second)},
          mask};
}

// Captures x * 2 into an NPUGraph and replays it after x changed.
at::Tensor graph_double(at::Tensor x) {
  auto side = c10_npu::getNPUStreamFromPool();
  c10_npu::NPUStreamGuard stream_guard(side);
  c10_npu::NPUGraph graph;
  graph.capture_begin();
  at::Tensor y = x * 2;
  graph.capture_end();
  x.fill_(5);
  graph.replay();
  c10_npu::getCurrentNPUStream().synchronize();
  return y;
}

// An op through the AOTI C shim for npu (as AOTInductor code and stable-ABI
// extensions call it).
at::Tensor shim_cumsum(const at::Tensor& x, int64_t dim) {
  AtenTensorHandle out = nullptr;
  const AOTITorchError rc = aoti_torch_npu_cumsum(
      torch::aot_inductor::tensor_pointer_to_tensor_handle(const_cast<at::Tensor*>(&x)), dim, nullptr, &out);
  TORCH_CHECK(rc == AOTI_TORCH_SUCCESS, "aoti_torch_npu_cumsum failed");
  at::Tensor result = *torch::aot_inductor::tensor_handle_to_tensor_pointer(out);
  aoti_torch_delete_tensor_object(out);
  return result;
}

int g_hook_calls = 0;
std::vector<std::string> g_hook_log;  // "begin:<name>", "pre", "post", "end"

void register_op_hooks() {
  at_npu::native::RegisterOpHookBeginFn([](const std::string& name) {
    ++g_hook_calls;
    g_hook_log.push_back("begin:" + name);
  });
  at_npu::native::RegisterOpHookPreFn([](const at::Tensor& t) {
    if (t.defined()) ++g_hook_calls;
    g_hook_log.push_back("pre");
  });
  at_npu::native::RegisterOpHookPostFn([](const at::Tensor& t) {
    if (t.defined()) ++g_hook_calls;
    g_hook_log.push_back("post");
  });
  at_npu::native::RegisterOpHookEndFn([]() {
    ++g_hook_calls;
    g_hook_log.push_back("end");
  });
}

// torch_npu's generator class used directly, as an extension's RNG kernel
// does: a generator of its own, philox_npu_state for a kernel's (seed,
// offset), a clone that continues from the same state.
std::vector<uint64_t> own_generator_draws(uint64_t seed) {
  at::Generator gen = at::make_generator<at_npu::NPUGeneratorImpl>(0);
  auto* impl = at::check_generator<at_npu::NPUGeneratorImpl>(gen);
  std::lock_guard<std::mutex> lock(gen.mutex());
  impl->set_current_seed(seed);
  const at_npu::PhiloxNpuState first = impl->philox_npu_state(10);
  std::shared_ptr<at_npu::NPUGeneratorImpl> copy = impl->clone();
  const at_npu::PhiloxNpuState second = impl->philox_npu_state(1);
  const at_npu::PhiloxNpuState from_copy = copy->philox_npu_state(1);
  impl->set_philox_offset_per_thread(100);
  return {first.seed_.val, first.offset_.val, second.offset_.val, from_copy.offset_.val,
          impl->philox_offset_per_thread(), impl->get_offset(), static_cast<uint64_t>(first.captured_)};
}

// philox_npu_state of the default generator (the caller may be capturing).
uint64_t default_philox_offset() {
  at::Generator gen = at_npu::detail::getDefaultNPUGenerator(-1);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<at_npu::NPUGeneratorImpl>(gen)->philox_npu_state(4).offset_.val;
}

// The registered PrivateUse1 hooks are torch_npu's NPUHooksInterface.
bool hooks_are_torch_npus() {
  at::PrivateUse1HooksInterface* hooks = c10_npu::get_npu_hooks();
  return dynamic_cast<c10_npu::NPUHooksInterface*>(hooks) != nullptr &&
         &hooks->getDefaultGenerator(0) == &at_npu::detail::getDefaultNPUGenerator(0) &&
         hooks->isAvailable() && hooks->deviceCount() == c10_npu::device_count();
}

std::string event_ipc_handle() {
  c10_npu::NPUEvent event;
  aclrtIpcEventHandle handle;
  event.ipc_handle(&handle);
  return "no error";
}

// The sync debug mode set through c10_npu::warning_state(), then a sync point.
void set_sync_debug_mode_and_sync(int level) {
  c10_npu::warning_state().set_sync_debug_mode(static_cast<c10_npu::SyncDebugMode>(level));
  c10_npu::warn_or_error_on_sync();
}

at::Tensor swapped(std::vector<int64_t> size) {
  return at_npu::native::empty_with_swapped_memory(size, at::kHalf, c10::Device(c10::DeviceType::PrivateUse1, 0));
}

at::Tensor ops_h_dropout_mask(const at::Tensor& self, int64_t numel, double p, int64_t seed, int64_t offset) {
  return at_npu::native::npu_dropout_gen_mask(self, {numel}, p, seed, offset, true, c10::nullopt);
}

// The aclop builder as op-plugin code writes it: Run() names the operator
// and refuses, a custom handler runs (Sync(): before Run returns).
std::string aclop_builder(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty_like(a);
  const std::vector<int64_t> perm = {0};
  try {
    at_npu::native::OpCommand cmd;
    cmd.Name("Add").Input(a).Input(b, "x2").Input(perm, at::kLong).Input(c10::Scalar(2.0), at::kFloat).Output(out)
        .Attr("alpha", 1.0f).Attr("unused", true, false).Run();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "ran";
}

double custom_handler_sync(const at::Tensor& x) {
  at::Tensor out = x.clone();
  std::atomic<int> ran{0};
  at_npu::native::OpCommand cmd;
  cmd.Name("Triple").Input(x).Output(out).Sync().SetCustomHandler([&ran] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ran = 1;
    return 0;
  });
  cmd.Run();
  return ran.load();  // 1: Sync() made Run wait for the handler
}

}  // namespace

TORCH_LIBRARY(vnpu_ext, m) { m.def("scaled_add(Tensor x, float scale, Tensor bias) -> Tensor"); }

TORCH_LIBRARY_IMPL(vnpu_ext, PrivateUse1, m) { m.impl("scaled_add", TORCH_FN(scaled_add)); }

TORCH_LIBRARY_IMPL(vnpu_ext, Meta, m) { m.impl("scaled_add", TORCH_FN(scaled_add_meta)); }

// NPUCachingAllocator::attachAllocatorTraceTracker: counts the segment
// events and the allocations of `tracked_bytes` (with their stacks, when
// the memory history keeps them).
std::atomic<int64_t> g_segment_allocs{0}, g_segment_frees{0}, g_tracked_allocs{0}, g_tracked_with_stack{0},
    g_tracked_frees{0};
std::atomic<int64_t> g_tracked_bytes{-1};

void attach_trace_tracker(int64_t tracked_bytes) {
  g_tracked_bytes = tracked_bytes;
  c10_npu::NPUCachingAllocator::attachAllocatorTraceTracker([](const c10_npu::NPUCachingAllocator::TraceEntry& e) {
    using Entry = c10_npu::NPUCachingAllocator::TraceEntry;
    if (e.action_ == Entry::SEGMENT_ALLOC) ++g_segment_allocs;
    if (e.action_ == Entry::SEGMENT_FREE) ++g_segment_frees;
    if (e.size_ != g_tracked_bytes.load() || e.stream_ == nullptr || e.device_ != 0) return;
    if (e.action_ == Entry::ALLOC) {
      ++g_tracked_allocs;
      if (e.context_) ++g_tracked_with_stack;
    }
    if (e.action_ == Entry::FREE_COMPLETED) ++g_tracked_frees;
  });
}

std::vector<int64_t> trace_tracker_counts() {
  return {g_segment_allocs.load(), g_segment_frees.load(), g_tracked_allocs.load(), g_tracked_with_stack.load(),
          g_tracked_frees.load(), c10_npu::NPUCachingAllocator::isHistoryEnabled() ? 1 : 0};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("own_generator_draws", &own_generator_draws);
  m.def("default_philox_offset", &default_philox_offset);
  m.def("hooks_are_torch_npus", &hooks_are_torch_npus);
  m.def("event_ipc_handle", &event_ipc_handle);
  m.def("set_sync_debug_mode_and_sync", &set_sync_debug_mode_and_sync);
  m.def("swapped", &swapped);
  m.def("ops_h_dropout_mask", &ops_h_dropout_mask);
  m.def("aclop_builder", &aclop_builder);
  m.def("custom_handler_sync", &custom_handler_sync);
  m.def("scaled_add", &scaled_add);
  m.def("failing_op", &failing_op);
  m.def("sleep_on_stream", &sleep_on_stream);
  m.def("callback_after_sleep", &callback_after_sleep);
  m.def("external_stream_roundtrip", &external_stream_roundtrip);
  m.def("acl_memory_roundtrip", &acl_memory_roundtrip);
  m.def("acl_bad_copy", &acl_bad_copy);
  m.def("view_from_blob", &view_from_blob);
  m.def("storage_sizes", &storage_sizes);
  m.def("device_stats_allocated", &device_stats_allocated);
  m.def("event_elapsed_ms", &event_elapsed_ms);
  m.def("graph_double", &graph_double);
  m.def("secondary_stream_join", &secondary_stream_join);
  m.def("philox_dropout_mask", &philox_dropout_mask);
  m.def("register_op_hooks", &register_op_hooks);
  m.def("hook_calls", [] { return g_hook_calls; });
  m.def("reset_hook_calls", [] {
    g_hook_calls = 0;
    g_hook_log.clear();
  });
  m.def("hook_log", [] { return g_hook_log; });
  m.def("check_torch_version",
        [](const std::string& v) { return c10_npu::detail::check_extension_torch_version(v.c_str()); });
  m.def("shim_cumsum", &shim_cumsum);
  m.def("soc_name", [] { return std::string(aclrtGetSocName()); });
  m.def("attach_trace_tracker", &attach_trace_tracker);
  m.def("trace_tracker_counts", &trace_tracker_counts);
  m.def("default_generator_seed", [] { return at_npu::detail::getDefaultNPUGenerator(0).current_seed(); });
  // init_npu.h, as a C++ program without Python starts and stops the device.
  m.def("init_npu_and_current", [](const std::string& device) {
    torch_npu::init_npu(device);
    torch::npu::synchronize();
    return static_cast<int>(c10::npu::current_device());
  });
  m.def("init_npu_index", [](int index) { torch_npu::init_npu(static_cast<c10::DeviceIndex>(index)); });
  m.def("finalize_npu", [] { torch_npu::finalize_npu(); });
}
