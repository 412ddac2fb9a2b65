// DeviceGuardImplInterface for npu: what torch's generic device/stream/event
// code (torch.Stream, torch.Event, DeviceGuard, autograd engine) calls.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "csrc/core/npu_capture.h"
#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_event.h"
#include "csrc/core/npu_stream.h"
#include "csrc/core/npu_trace.h"
#include <vnpu/event.h>
#include <vnpu/runtime.h>

namespace torch_npu {
namespace {

vnpu::Event* as_event(void* event) { return static_cast<vnpu::Event*>(event); }

struct NpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    const auto old = current_device();
    if (d.index() != old) set_current_device(d.index());
    return npu_device(old);
  }
  c10::Device getDevice() const override { return npu_device(current_device()); }
  void setDevice(c10::Device d) const override { set_current_device(d.index()); }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      set_current_device(d.index());
    } catch (...) {
      // Called from destructors restoring a device that was valid before.
    }
  }

  c10::Stream getStream(c10::Device d) const override { return current_stream(d.index()); }
  c10::Stream getDefaultStream(c10::Device d) const override { return default_stream(d.index()); }
  // The aclrtStream (the runtime stream), as torch_npu's npu_stream and the
  // ACL runtime API (acl_rt.h) know it.
  void* getStreamNativeHandle(const c10::Stream s) const override { return &runtime_stream(s); }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    return new_stream(d.index(), priority);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return new_stream(d.index(), high_priority ? -1 : 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    const c10::Stream old = current_stream(s.device_index());
    set_current_stream(s);
    return old;
  }

  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    destroy_event(event);
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", static_cast<int>(device_index),
                " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()), ".");
    if (*event == nullptr) {
      *event = create_event(/*enable_timing=*/flag == c10::EventFlag::BACKEND_DEFAULT);
    }
    with_torch_errors([&] { as_event(*event)->record(runtime_stream(stream)); });
    trace_event_on_stream(TraceKind::kEventRecord, *event, stream);
  }

  void block(void* event, const c10::Stream& stream) const override {
    check_not_forked();
    if (event == nullptr) return;
    vnpu::Stream& waiter = runtime_stream(stream);
    before_event_wait(*as_event(event), waiter);  // an event of a capture forks or joins it
    with_torch_errors([&] { as_event(event)->block(waiter); });
    trace_event_on_stream(TraceKind::kEventWait, event, stream);
  }

  bool queryEvent(void* event) const override {
    check_not_forked();
    const bool done = event == nullptr || as_event(event)->query();
    // The host saw the work complete: to the sanitizer, a synchronisation.
    if (done && event != nullptr) trace_event(TraceKind::kEventSynchronization, event);
    return done;
  }

  void synchronizeEvent(void* event) const override {
    check_not_forked();
    if (event == nullptr) return;
    with_torch_errors([&] { as_event(event)->synchronize(); });
    trace_event(TraceKind::kEventSynchronization, event);
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "Both events must be recorded before calculating elapsed time.");
    return with_torch_errors([&] { return as_event(start)->elapsed_ms(*as_event(end)); });
  }

  bool queryStream(const c10::Stream& stream) const override {
    check_not_forked();
    const bool done = runtime_stream(stream).query();
    if (done) trace_stream(TraceKind::kStreamSynchronization, stream);
    return done;
  }
  void synchronizeStream(const c10::Stream& stream) const override { synchronize_stream(stream); }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    synchronize_device(device_index);
  }

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override {
    record_stream(data_ptr, stream);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NpuGuardImpl);

}  // namespace
}  // namespace torch_npu
