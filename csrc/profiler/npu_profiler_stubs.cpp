// The legacy autograd profiler's device hooks for npu
// (torch.autograd.profiler.profile(use_device="npu"), torch's
// ProfilerStubs for PrivateUse1, as CUDA's use cudaEvents): at each op's
// start and end the profiler records an npu event on the current stream,
// and an op's device time is the time between its two events, measured on
// the stream worker (vnpu::Event with timing). Without them the profiler
// fails in every op's RecordFunction callback ("PrivateUse1 used in profiler
// but not enabled").
#include <torch/csrc/profiler/stubs/base.h>

#include <c10/util/ApproximateClock.h>

#include <memory>

#include <vnpu/event.h>
#include <vnpu/stream.h>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_event.h"
#include "csrc/core/npu_stream.h"

namespace torch_npu::profiler {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

struct NpuProfilerStubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    const c10::DeviceIndex index = current_device();
    if (device != nullptr) *device = index;
    vnpu::Event* e = create_event(/*enable_timing=*/true);
    *event = std::shared_ptr<void>(e, [](void* p) { destroy_event(p); });
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
    vnpu::Stream& stream = current_runtime_stream(index);
    // A capturing stream cannot time its work (nothing runs): the event
    // stays unrecorded and elapsed() reports 0 for it.
    if (!stream.capturing()) with_torch_errors([&] { e->record(stream); });
  }

  float elapsed(const ProfilerVoidEventStub* start, const ProfilerVoidEventStub* end) const override {
    auto* a = static_cast<vnpu::Event*>(start->get());
    auto* b = static_cast<vnpu::Event*>(end->get());
    if (a == nullptr || b == nullptr || !a->recorded() || !b->recorded()) return 0.f;
    return with_torch_errors([&] {
      b->synchronize();
      return static_cast<float>(a->elapsed_ms(*b) * 1000.0);  // microseconds, as CUDA's stubs
    });
  }

  // NVTX-style annotations: the npu timeline's markers are torch.npu.mstx.
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}

  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    const c10::DeviceIndex saved = current_device();
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      set_current_device(d);
      op(d);
    }
    set_current_device(saved);
  }

  void synchronize() const override { synchronize_device(-1); }
};

struct Registration {
  Registration() {
    static NpuProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
};
Registration g_registration;

}  // namespace
}  // namespace torch_npu::profiler
