// The ACL runtime's streams, events and host callbacks (acl_rt.h) over
// vNPU's runtime streams. An aclrtStream is the runtime stream itself: one
// of torch's (NPUStream::stream()) or one made by aclrtCreateStream; NULL is
// the current device's default stream. Handles are looked up before use, so
// a stale or foreign handle returns ACL_ERROR_INVALID_PARAM instead of
// crashing.
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include <c10/core/impl/VirtualGuardImpl.h>

#include "csrc/api/acl_status.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_event.h"
#include "csrc/core/npu_stream.h"
#include "third_party/acl/inc/acl/acl_rt.h"
#include <vnpu/event.h>
#include <vnpu/stream.h>

namespace torch_npu {
namespace acl {
namespace {

// The c10::Stream behind `handle`, or nullopt with the failure recorded.
std::optional<c10::Stream> stream_of(const char* api, aclrtStream handle) {
  if (handle == nullptr) return default_stream(current_device());
  std::optional<c10::Stream> stream = stream_of_handle(handle);
  if (!stream) {
    fail(ACL_ERROR_INVALID_PARAM, std::string(api) +
                                      ": the stream is not a stream of the virtual NPU (destroyed, or never "
                                      "created by aclrtCreateStream or torch)");
  }
  return stream;
}

bool check_event(const char* api, const void* event) {
  if (event != nullptr && is_live_event(event)) return true;
  fail(ACL_ERROR_INVALID_PARAM, std::string(api) + ": the event is not a live event (created by aclrtCreateEvent "
                                                   "and not destroyed)");
  return false;
}

c10::impl::VirtualGuardImpl& npu_guard() {
  static c10::impl::VirtualGuardImpl guard(c10::DeviceType::PrivateUse1);
  return guard;
}

aclError create_event(const char* api, aclrtEvent* event, bool timing) {
  if (event == nullptr) return fail(ACL_ERROR_INVALID_PARAM, std::string(api) + ": event is NULL");
  return acl_call(api, [&] {
    *event = torch_npu::create_event(timing);
    return ACL_SUCCESS;
  });
}

}  // namespace
}  // namespace acl
}  // namespace torch_npu

using torch_npu::acl::acl_call;
using torch_npu::acl::fail;
using torch_npu::acl::stream_of;

extern "C" {

aclError aclrtCreateStream(aclrtStream* stream) { return aclrtCreateStreamWithConfig(stream, 0, 0); }

aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t priority, uint32_t flag) {
  if (stream == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is NULL");
  return acl_call("aclrtCreateStream", [&] {
    *stream = torch_npu::create_acl_stream(-1, static_cast<int>(priority));
    return ACL_SUCCESS;
  });
}

aclError aclrtDestroyStream(aclrtStream stream) {
  return acl_call("aclrtDestroyStream", [&] {
    if (!torch_npu::destroy_acl_stream(stream)) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtDestroyStream: the stream was not created by aclrtCreateStream, or was destroyed already");
    }
    return ACL_SUCCESS;
  });
}

aclError aclrtDestroyStreamForce(aclrtStream stream) { return aclrtDestroyStream(stream); }

aclError aclrtSynchronizeStream(aclrtStream stream) { return aclrtSynchronizeStreamWithTimeout(stream, -1); }

aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
  return acl_call("aclrtSynchronizeStream", [&] {
    auto s = stream_of("aclrtSynchronizeStream", stream);
    if (!s) return ACL_ERROR_INVALID_PARAM;
    vnpu::Stream& runtime = torch_npu::runtime_stream(*s);
    if (timeout >= 0) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
      if (!runtime.wait_completed_until(runtime.last_enqueued(), deadline)) {
        return fail(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "aclrtSynchronizeStreamWithTimeout: the stream's work did not "
                                                      "complete within " + std::to_string(timeout) + " ms");
      }
    }
    runtime.synchronize();  // reports a failed kernel
    return ACL_SUCCESS;
  });
}

aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status) {
  if (status == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamQuery: status is NULL");
  return acl_call("aclrtStreamQuery", [&] {
    auto s = stream_of("aclrtStreamQuery", stream);
    if (!s) return ACL_ERROR_INVALID_PARAM;
    *status = torch_npu::stream_idle(*s) ? ACL_STREAM_STATUS_COMPLETE : ACL_STREAM_STATUS_NOT_READY;
    return ACL_SUCCESS;
  });
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  return acl_call("aclrtStreamWaitEvent", [&] {
    auto s = stream_of("aclrtStreamWaitEvent", stream);
    if (!s) return ACL_ERROR_INVALID_PARAM;
    if (!torch_npu::acl::check_event("aclrtStreamWaitEvent", event)) return ACL_ERROR_INVALID_PARAM;
    torch_npu::acl::npu_guard().block(event, *s);
    return ACL_SUCCESS;
  });
}

aclError aclrtCreateEvent(aclrtEvent* event) { return torch_npu::acl::create_event("aclrtCreateEvent", event, true); }

aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag) {
  return torch_npu::acl::create_event("aclrtCreateEventWithFlag", event, (flag & ACL_EVENT_TIME_LINE) != 0);
}

aclError aclrtCreateEventExWithFlag(aclrtEvent* event, uint32_t flag) {
  return torch_npu::acl::create_event("aclrtCreateEventExWithFlag", event, (flag & ACL_EVENT_TIME_LINE) != 0);
}

aclError aclrtDestroyEvent(aclrtEvent event) {
  if (!torch_npu::acl::check_event("aclrtDestroyEvent", event)) return ACL_ERROR_INVALID_PARAM;
  torch_npu::destroy_event(event);
  return ACL_SUCCESS;
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  return acl_call("aclrtRecordEvent", [&] {
    auto s = stream_of("aclrtRecordEvent", stream);
    if (!s) return ACL_ERROR_INVALID_PARAM;
    if (!torch_npu::acl::check_event("aclrtRecordEvent", event)) return ACL_ERROR_INVALID_PARAM;
    void* handle = event;
    torch_npu::acl::npu_guard().record(&handle, *s, s->device_index(), c10::EventFlag::PYTORCH_DEFAULT);
    return ACL_SUCCESS;
  });
}

aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus* status) {
  if (status == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEvent: status is NULL");
  return acl_call("aclrtQueryEvent", [&] {
    if (!torch_npu::acl::check_event("aclrtQueryEvent", event)) return ACL_ERROR_INVALID_PARAM;
    *status = static_cast<vnpu::Event*>(event)->query() ? ACL_EVENT_STATUS_COMPLETE : ACL_EVENT_STATUS_NOT_READY;
    return ACL_SUCCESS;
  });
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) {
  if (status == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: status is NULL");
  return acl_call("aclrtQueryEventStatus", [&] {
    if (!torch_npu::acl::check_event("aclrtQueryEventStatus", event)) return ACL_ERROR_INVALID_PARAM;
    *status = static_cast<vnpu::Event*>(event)->query() ? ACL_EVENT_RECORDED_STATUS_COMPLETE
                                                        : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    return ACL_SUCCESS;
  });
}

aclError aclrtSynchronizeEvent(aclrtEvent event) {
  return acl_call("aclrtSynchronizeEvent", [&] {
    if (!torch_npu::acl::check_event("aclrtSynchronizeEvent", event)) return ACL_ERROR_INVALID_PARAM;
    static_cast<vnpu::Event*>(event)->synchronize();
    return ACL_SUCCESS;
  });
}

aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent) {
  if (ms == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: ms is NULL");
  return acl_call("aclrtEventElapsedTime", [&] {
    if (!torch_npu::acl::check_event("aclrtEventElapsedTime", startEvent) ||
        !torch_npu::acl::check_event("aclrtEventElapsedTime", endEvent)) {
      return ACL_ERROR_INVALID_PARAM;
    }
    *ms = static_cast<float>(
        static_cast<vnpu::Event*>(startEvent)->elapsed_ms(*static_cast<vnpu::Event*>(endEvent)));
    return ACL_SUCCESS;
  });
}

aclError aclrtLaunchCallback(aclrtCallback fn, void* userData, aclrtCallbackBlockType blockType, aclrtStream stream) {
  if (fn == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchCallback: fn is NULL");
  return acl_call("aclrtLaunchCallback", [&] {
    auto s = stream_of("aclrtLaunchCallback", stream);
    if (!s) return ACL_ERROR_INVALID_PARAM;
    torch_npu::launch_host_task(*s, "aclrtLaunchCallback", [fn, userData] { fn(userData); });
    return ACL_SUCCESS;
  });
}

// Callbacks run on the stream itself (aclrtLaunchCallback), so no thread
// needs to be subscribed to process them.
aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream) { return ACL_SUCCESS; }

aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream) { return ACL_SUCCESS; }

aclError aclrtProcessReport(int32_t timeout) {
  // Nothing is ever reported here: wait as a report thread would, then time
  // out, so a processing loop does not spin.
  std::this_thread::sleep_for(std::chrono::milliseconds(timeout < 0 ? 100 : std::min(timeout, 1000)));
  return fail(ACL_ERROR_RT_REPORT_TIMEOUT, "aclrtProcessReport: no callback to process (vNPU runs callbacks on their "
                                           "stream)");
}

}  // extern "C"
