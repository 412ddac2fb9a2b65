// c10_npu::NPUEvent (NPUEvent.h) over the npu guard's events (registered
// vnpu::Event handles, the same ones torch.npu.Event and aclrtCreateEvent use).
#include <c10/core/impl/VirtualGuardImpl.h>

#include "csrc/core/npu_error.h"
#include "csrc/core/npu_event.h"
#include "csrc/core/npu_stream.h"
#include "torch_npu/csrc/core/npu/NPUEvent.h"

namespace c10_npu {
namespace {

c10::impl::VirtualGuardImpl& event_guard() {
  static c10::impl::VirtualGuardImpl guard(c10::DeviceType::PrivateUse1);
  return guard;
}

void check_stream_takes_events(const NPUStream& stream, const char* what) {
  TORCH_CHECK(!torch_npu::is_external_stream(stream.unwrap()), what,
              " is not supported on an external stream (getStreamFromExternal)",
              torch_npu::error_suffix(torch_npu::SubModule::kPTA, torch_npu::ErrCode::kNotSupport));
}

}  // namespace

NPUEvent::NPUEvent() = default;

NPUEvent::NPUEvent(unsigned int flags) : flags_(flags) {}

namespace {
[[noreturn]] void refuse_ipc(const char* what) {
  TORCH_CHECK(false, what, " is not supported on the virtual NPU: there are no IPC event handles to share between "
              "processes (torch.npu.Event(interprocess=True) refuses too). Synchronize the producer's stream before "
              "sharing the memory instead.",
              torch_npu::error_suffix(torch_npu::SubModule::kPTA, torch_npu::ErrCode::kNotSupport));
}
}  // namespace

NPUEvent::NPUEvent(c10::DeviceIndex device_index, const aclrtIpcEventHandle* handle) {
  refuse_ipc("NPUEvent(device_index, const aclrtIpcEventHandle*)");
}

void NPUEvent::ipc_handle(aclrtIpcEventHandle* handle) { refuse_ipc("NPUEvent::ipc_handle"); }

NPUEvent::~NPUEvent() { torch_npu::destroy_event(event_); }

NPUEvent::NPUEvent(NPUEvent&& other) noexcept { moveHelper(std::move(other)); }

NPUEvent& NPUEvent::operator=(NPUEvent&& other) noexcept {
  if (this != &other) {
    torch_npu::destroy_event(event_);
    event_ = nullptr;
    is_created_ = false;
    moveHelper(std::move(other));
  }
  return *this;
}

void NPUEvent::moveHelper(NPUEvent&& other) noexcept {
  std::swap(flags_, other.flags_);
  std::swap(is_created_, other.is_created_);
  std::swap(was_recorded_, other.was_recorded_);
  std::swap(device_index_, other.device_index_);
  std::swap(event_, other.event_);
}

void NPUEvent::createEvent(c10::DeviceIndex device_index) {
  device_index_ = device_index;
  event_ = torch_npu::create_event((flags_ & ACL_EVENT_TIME_LINE) != 0);
  is_created_ = true;
}

bool NPUEvent::query() const {
  if (!is_created_) return true;
  return event_guard().queryEvent(event_);
}

void NPUEvent::record() { record(getCurrentNPUStream()); }

void NPUEvent::recordOnce(const NPUStream& stream) {
  if (!was_recorded_) record(stream);
}

void NPUEvent::record(const NPUStream& stream) {
  check_stream_takes_events(stream, "NPUEvent::record");
  if (!is_created_) createEvent(stream.device_index());
  TORCH_CHECK(device_index_ == stream.device_index(), "Event device ", static_cast<int>(device_index_),
              " does not match recording stream's device ", static_cast<int>(stream.device_index()), ".",
              torch_npu::error_suffix(torch_npu::SubModule::kPTA, torch_npu::ErrCode::kParam));
  event_guard().record(&event_, stream.unwrap(), device_index_, c10::EventFlag::PYTORCH_DEFAULT);
  was_recorded_ = true;
}

void NPUEvent::block(const NPUStream& stream) {
  check_stream_takes_events(stream, "NPUEvent::block");
  if (is_created_) event_guard().block(event_, stream.unwrap());
}

float NPUEvent::elapsed_time(const NPUEvent& other) const {
  TORCH_CHECK(is_created_ && other.isCreated(), "Both events must be recorded before calculating elapsed time.",
              torch_npu::error_suffix(torch_npu::SubModule::kPTA, torch_npu::ErrCode::kParam));
  return static_cast<float>(torch_npu::elapsed_time_between(reinterpret_cast<uintptr_t>(event_),
                                                            reinterpret_cast<uintptr_t>(other.event_)));
}

void NPUEvent::synchronize() const {
  if (is_created_) event_guard().synchronizeEvent(event_);
}

}  // namespace c10_npu
