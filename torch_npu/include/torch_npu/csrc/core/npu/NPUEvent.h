// c10_npu::NPUEvent: a movable, non-copyable npu event, created lazily on
// the device of the first stream that records it (as at::cuda::CUDAEvent).
// Its aclrtEvent is accepted by the ACL runtime API. Recording on, or making
// an external stream (getStreamFromExternal) wait for, an event raises, as in
// torch_npu.
#pragma once

#include <cstdint>
#include <optional>

#include <c10/core/Device.h>
#include <c10/util/Optional.h>

#include "third_party/acl/inc/acl/acl_rt.h"
#include "torch_npu/csrc/core/npu/NPUMacros.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

namespace c10_npu {

struct C10_NPU_API NPUEvent {
  NPUEvent();
  // flags: ACL_EVENT_TIME_LINE (timing), ACL_EVENT_SYNC, ...
  explicit NPUEvent(unsigned int flags);
  // An event shared by another process (ipc_handle): interprocess events
  // are not supported on the virtual NPU (torch.npu.Event(interprocess=True)
  // refuses too), so this raises.
  NPUEvent(c10::DeviceIndex device_index, const aclrtIpcEventHandle* handle);
  ~NPUEvent();

  NPUEvent(const NPUEvent&) = delete;
  NPUEvent& operator=(const NPUEvent&) = delete;
  NPUEvent(NPUEvent&& other) noexcept;
  NPUEvent& operator=(NPUEvent&& other) noexcept;

  operator aclrtEvent() const { return event(); }

  c10::optional<at::Device> device() const {
    if (!is_created_) return std::nullopt;
    return c10::Device(c10::DeviceType::PrivateUse1, device_index_);
  }
  bool isCreated() const { return is_created_; }
  c10::DeviceIndex device_index() const { return device_index_; }
  aclrtEvent event() const { return event_; }

  // True when the work before the last record has completed (or nothing was recorded).
  bool query() const;
  // Records on the current stream of the current device.
  void record();
  // Records only if never recorded before.
  void recordOnce(const NPUStream& stream);
  void record(const NPUStream& stream);
  // Makes `stream` wait for the work before the last record.
  void block(const NPUStream& stream);
  // Milliseconds from this event's record to `other`'s (both timing events, both completed).
  float elapsed_time(const NPUEvent& other) const;
  void synchronize() const;
  // The handle another process would open this event with: raises, as the
  // IPC constructor above.
  void ipc_handle(aclrtIpcEventHandle* handle);

 private:
  void createEvent(c10::DeviceIndex device_index);
  void moveHelper(NPUEvent&& other) noexcept;

  unsigned int flags_ = 0;
  bool is_created_ = false;
  bool was_recorded_ = false;
  c10::DeviceIndex device_index_ = -1;
  aclrtEvent event_ = nullptr;
};

}  // namespace c10_npu
