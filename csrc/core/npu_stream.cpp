#include "csrc/core/npu_stream.h"

#include <array>
#include <atomic>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"

namespace torch_npu {
namespace {

constexpr int kStreamsPerDevice = vnpu::Device::kStreamPoolSize + 1;

// Cache of runtime stream pointers: streams live until exit, so a pointer
// once published stays valid and lookups need no lock.
std::array<std::array<std::atomic<vnpu::Stream*>, kStreamsPerDevice>, kMaxDevices> g_streams{};

// Current stream index per device for this thread (0 = default stream).
thread_local std::array<uint8_t, kMaxDevices> t_current_stream{};

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  return device < 0 ? current_device() : device;
}

vnpu::Stream& lookup(c10::DeviceIndex device, int index) {
  vnpu::Stream* stream = g_streams[device][index].load(std::memory_order_acquire);
  if (stream != nullptr) return *stream;
  try {
    stream = &runtime_device(device).stream(index);
  } catch (const vnpu::Error& e) {
    throw_runtime_error(e);
  }
  g_streams[device][index].store(stream, std::memory_order_release);
  return *stream;
}

}  // namespace

vnpu::Stream& runtime_stream(const c10::Stream& stream) {
  const auto device = stream.device_index();
  check_device_index(device);
  const auto id = stream.id();
  NPU_CHECK(id >= 0 && id < kStreamsPerDevice, "Invalid NPU stream id ", id, " on npu:",
            static_cast<int>(device));
  return lookup(device, static_cast<int>(id));
}

vnpu::Stream& current_runtime_stream(c10::DeviceIndex device) {
  // Fast path for kernel launches: the device index came from a live tensor,
  // so it is valid and the stream usually cached.
  const int index = t_current_stream[device];
  vnpu::Stream* stream = g_streams[device][index].load(std::memory_order_acquire);
  return stream != nullptr ? *stream : lookup(device, index);
}

c10::Stream current_stream(c10::DeviceIndex device) {
  device = resolve(device);
  check_device_index(device);
  return c10::Stream(c10::Stream::UNSAFE, npu_device(device), t_current_stream[device]);
}

c10::Stream default_stream(c10::DeviceIndex device) {
  device = resolve(device);
  check_device_index(device);
  return c10::Stream(c10::Stream::UNSAFE, npu_device(device), 0);
}

c10::Stream new_stream(c10::DeviceIndex device, int priority) {
  device = resolve(device);
  const int index = runtime_device(device).next_pool_stream_index(priority);
  return c10::Stream(c10::Stream::UNSAFE, npu_device(device), index);
}

void set_current_stream(const c10::Stream& stream) {
  runtime_stream(stream);  // validates
  t_current_stream[stream.device_index()] = static_cast<uint8_t>(stream.id());
}

void synchronize_device(c10::DeviceIndex device) {
  try {
    if (device >= 0) {
      runtime_device(device).synchronize();
      return;
    }
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      if (is_initialized()) vnpu::Runtime::instance().device(d).synchronize();
    }
  } catch (const vnpu::Error& e) {
    throw_runtime_error(e);
  }
}

void synchronize_stream(const c10::Stream& stream) {
  try {
    runtime_stream(stream).synchronize();
  } catch (const vnpu::Error& e) {
    throw_runtime_error(e);
  }
}

}  // namespace torch_npu
