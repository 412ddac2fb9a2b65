// torch_npu's C++ stream and device API (NPUStream.h, NPUFunctions.h) over
// the adaptor's streams (csrc/core/npu_stream.h) and devices.
#include <ostream>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"
#include "csrc/launch/sync_point.h"
#include "torch_npu/csrc/core/npu/NPUFunctions.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"
#include <vnpu/stream.h>

namespace c10_npu {
namespace {

void check_not_external(const NPUStream& stream, const char* what) {
  TORCH_CHECK(!torch_npu::is_external_stream(stream.unwrap()), what,
              " is not supported on an external stream (getStreamFromExternal): synchronize it with "
              "aclrtSynchronizeStream", torch_npu::error_suffix(torch_npu::SubModule::kPTA,
                                                                torch_npu::ErrCode::kNotSupport));
}

}  // namespace

NPUStream::NPUStream(c10::Stream stream) : stream_(stream) {
  TORCH_CHECK(stream_.device_type() == c10::DeviceType::PrivateUse1, "Expected an npu stream, got a ",
              stream_.device_type(), " stream");
}

bool NPUStream::query() const {
  check_not_external(*this, "NPUStream::query");
  return stream_.query();
}

void NPUStream::validate() const { torch_npu::runtime_stream(stream_); }

void NPUStream::synchronize() const {
  check_not_external(*this, "NPUStream::synchronize");
  torch_npu::synchronize_stream(stream_);
}

aclrtStream NPUStream::stream() const { return &torch_npu::runtime_stream(stream_); }

bool NPUStream::isSyncLaunchStream() const { return torch_npu::is_sync_launch_stream(stream_); }

NPUStream getNPUStreamFromSyncLaunchPool(c10::DeviceIndex device_index) {
  return NPUStream(NPUStream::UNCHECKED, torch_npu::new_sync_launch_stream(device_index));
}

NPUStream getNPUStreamFromPool(c10::DeviceIndex device) {
  return NPUStream(NPUStream::UNCHECKED, torch_npu::new_stream(device, 0));
}

NPUStream getStreamFromPool(const bool isHighPriority, c10::DeviceIndex device_index) {
  return NPUStream(NPUStream::UNCHECKED, torch_npu::new_stream(device_index, isHighPriority ? -1 : 0));
}

NPUStream getStreamFromPool(const int priority, c10::DeviceIndex device) {
  return NPUStream(NPUStream::UNCHECKED, torch_npu::new_stream(device, priority));
}

NPUStream getDefaultNPUStream(c10::DeviceIndex device_index) {
  return NPUStream(NPUStream::UNCHECKED, torch_npu::default_stream(device_index));
}

NPUStream getCurrentNPUStream(c10::DeviceIndex device_index) {
  return NPUStream(NPUStream::UNCHECKED, torch_npu::current_stream(device_index));
}

aclrtStream getCurrentNPUStreamNoWait(c10::DeviceIndex device_index) {
  return getCurrentNPUStream(device_index).stream();
}

NPUStream getStreamFromExternal(aclrtStream stream, c10::DeviceIndex device_index) {
  std::optional<c10::Stream> wrapped = torch_npu::stream_of_handle(stream);
  TORCH_CHECK(wrapped.has_value(), "getStreamFromExternal: the aclrtStream is not a stream of the virtual NPU "
              "(create it with aclrtCreateStream)",
              torch_npu::error_suffix(torch_npu::SubModule::kPTA, torch_npu::ErrCode::kParam));
  TORCH_CHECK(wrapped->device_index() == device_index, "getStreamFromExternal: the stream belongs to npu:",
              static_cast<int>(wrapped->device_index()), ", not npu:", static_cast<int>(device_index),
              torch_npu::error_suffix(torch_npu::SubModule::kPTA, torch_npu::ErrCode::kParam));
  return NPUStream(NPUStream::UNCHECKED, *wrapped);
}

void setCurrentNPUStream(NPUStream stream) { torch_npu::set_current_stream(stream.unwrap()); }

bool npuSynchronizeDevice(bool check_error) {
  try {
    torch_npu::synchronize_device(torch_npu::current_device());
  } catch (const c10::Error& e) {
    if (check_error) throw;
    TORCH_WARN("npuSynchronizeDevice: ", e.what_without_backtrace());
    return false;
  }
  return true;
}

bool npuSynchronizeUsedDevices(bool check_error) {
  try {
    torch_npu::synchronize_device(-1);
  } catch (const c10::Error& e) {
    if (check_error) throw;
    TORCH_WARN("npuSynchronizeUsedDevices: ", e.what_without_backtrace());
    return false;
  }
  return true;
}

std::ostream& operator<<(std::ostream& out, const NPUStream& s) { return out << s.unwrap(); }

// ---------------------------------------------------------------- NPUFunctions.h

c10::DeviceIndex device_count() noexcept { return torch_npu::device_count(); }

c10::DeviceIndex device_count_ensure_non_zero() {
  const c10::DeviceIndex count = torch_npu::device_count();
  TORCH_CHECK(count > 0, "No NPUs are available", torch_npu::error_suffix(torch_npu::SubModule::kPTA,
                                                                          torch_npu::ErrCode::kUnavail));
  return count;
}

c10::DeviceIndex current_device() { return torch_npu::current_device(); }

void set_device(c10::DeviceIndex device) {
  torch_npu::check_device_index(device);
  torch_npu::set_current_device(device);
}

void device_synchronize() { torch_npu::synchronize_device(torch_npu::current_device()); }

int ExchangeDevice(int device) {
  const int previous = torch_npu::current_device();
  if (device != previous) set_device(static_cast<c10::DeviceIndex>(device));
  return previous;
}

int MaybeExchangeDevice(int to_device) { return ExchangeDevice(to_device); }

aclError GetDevice(int32_t* device) { return aclrtGetDevice(device); }

aclError SetDevice(c10::DeviceIndex device) { return aclrtSetDevice(device); }

aclError MaybeSetDevice(c10::DeviceIndex device) { return aclrtSetDevice(device); }

void stream_synchronize(aclrtStream stream) { NPU_CHECK_ERROR(aclrtSynchronizeStream(stream)); }

// The mode lives in the launch layer (torch.npu.set_sync_debug_mode's).
void WarningState::set_sync_debug_mode(SyncDebugMode level) {
  torch_npu::set_sync_debug_mode(static_cast<int>(level));
}
SyncDebugMode WarningState::get_sync_debug_mode() {
  return static_cast<SyncDebugMode>(torch_npu::sync_debug_mode());
}

WarningState& warning_state() {
  static WarningState state;
  return state;
}

void warn_or_error_on_sync() { torch_npu::report_sync_point(); }

}  // namespace c10_npu
