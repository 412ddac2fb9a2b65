#include "csrc/core/npu_stream.h"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <c10/util/StringUtil.h>

#include "csrc/core/npu_capture.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_trace.h"
#include <vnpu/runtime.h>
#include <vnpu/stream.h>

namespace torch_npu {
namespace {

constexpr int kStreamsPerDevice = vnpu::Device::kMaxStreamIndex + 1;  // every runtime index but external ones

// Note [Stream ids]
// A c10::Stream's id follows real torch_npu's layout, (type << 5) | index,
// which code reads (`stream_id >> 5` is the priority pool) and which
// torch.npu.Stream(stream_id=...) must accept back: DEFAULT 0 (the default
// stream), SECONDARY 1 (here: the dedicated communication streams),
// SYNCLAUNCH 2 (4 streams), NORMAL 3 and HIGH 4 (the pools, 32 each). The
// runtime numbers the same streams 0..kMaxStreamIndex (vnpu::Device); these
// two functions translate. External streams keep kExternalStreamIdBit.
enum StreamIdType : int64_t { kDefaultType = 0, kSecondaryType = 1, kSyncLaunchType = 2, kNormalType = 3,
                              kHighType = 4 };
constexpr int kIdIndexBits = 5;
using RuntimeDevice = vnpu::Device;

int64_t make_id(StreamIdType type, int index) { return (int64_t{type} << kIdIndexBits) | index; }

// The runtime index of a stream id, or -1 when the id names no stream slot.
int runtime_index_or_negative(int64_t id) {
  if (id < 0 || (id >> kIdIndexBits) > kHighType) return -1;
  const int index = static_cast<int>(id & ((1 << kIdIndexBits) - 1));
  switch (static_cast<StreamIdType>(id >> kIdIndexBits)) {
    case kDefaultType:
      return index == 0 ? 0 : -1;
    case kNormalType:
      return 1 + index;
    case kHighType:
      return 1 + RuntimeDevice::kStreamsPerPool + index;
    case kSyncLaunchType:
      return index < RuntimeDevice::kSyncLaunchStreams ? RuntimeDevice::kFirstSyncLaunchIndex + index : -1;
    case kSecondaryType:
      return index < RuntimeDevice::kMaxDedicatedStreams ? RuntimeDevice::kFirstDedicatedIndex + index : -1;
  }
  return -1;
}

// Cache of runtime stream pointers: streams live until exit, so a pointer
// once published stays valid and lookups need no lock.
std::array<std::array<std::atomic<vnpu::Stream*>, kStreamsPerDevice>, kMaxDevices> g_streams{};

// Current stream id per device for this thread (0 = default stream; ids
// with kExternalStreamIdBit name ACL streams).
thread_local std::array<int32_t, kMaxDevices> t_current_stream{};

// Streams made through the ACL runtime API (aclrtCreateStream), by their
// runtime stream index. Rare next to kernel launches, so a mutex is fine.
struct AclStreams {
  std::mutex mutex;
  std::map<int, std::shared_ptr<vnpu::Stream>> by_index[kMaxDevices];
};
AclStreams& acl_streams() {
  static auto* streams = new AclStreams();  // leaked: used until exit
  return *streams;
}

vnpu::Stream& acl_stream(c10::DeviceIndex device, int64_t id) {
  const int index = static_cast<int>(id & ~kExternalStreamIdBit);
  AclStreams& streams = acl_streams();
  std::lock_guard<std::mutex> lock(streams.mutex);
  auto it = streams.by_index[device].find(index);
  NPU_CHECK(it != streams.by_index[device].end(), "Invalid NPU stream id ", id, " on npu:",
            static_cast<int>(device), ": its external stream was destroyed (aclrtDestroyStream)");
  return *it->second;
}

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  return device < 0 ? current_device() : device;
}

vnpu::Stream& lookup(c10::DeviceIndex device, int index) {
  vnpu::Stream* stream = g_streams[device][index].load(std::memory_order_acquire);
  if (stream != nullptr) return *stream;
  stream = with_torch_errors([&] { return &runtime_device(device).stream(index); });
  g_streams[device][index].store(stream, std::memory_order_release);
  return *stream;
}

// What a valid id looks like, for the errors of both checks below.
const std::string& stream_id_layout() {
  static const std::string layout = c10::str(
      "npu stream ids are (type << 5) | index, with types DEFAULT 0 (index 0), SECONDARY 1, SYNCLAUNCH 2 (index < ",
      RuntimeDevice::kSyncLaunchStreams, "), NORMAL 3 and HIGH 4 (index < ", RuntimeDevice::kStreamsPerPool, ")");
  return layout;
}

int runtime_index_of(int64_t id, c10::DeviceIndex device) {
  const int index = runtime_index_or_negative(id);
  NPU_CHECK(index >= 0, "Invalid NPU stream id ", id, " on npu:", static_cast<int>(device), ": ",
            stream_id_layout());
  return index;
}

}  // namespace

int64_t stream_id_of_index(int index) {
  if (index == 0) return make_id(kDefaultType, 0);
  if (index <= RuntimeDevice::kStreamsPerPool) return make_id(kNormalType, index - 1);
  if (index <= RuntimeDevice::kStreamPoolSize) return make_id(kHighType, index - 1 - RuntimeDevice::kStreamsPerPool);
  if (index < RuntimeDevice::kFirstDedicatedIndex) {
    return make_id(kSyncLaunchType, index - RuntimeDevice::kFirstSyncLaunchIndex);
  }
  if (index <= RuntimeDevice::kMaxStreamIndex) {
    return make_id(kSecondaryType, index - RuntimeDevice::kFirstDedicatedIndex);
  }
  return kExternalStreamIdBit | index;
}

bool is_sync_launch_stream(const c10::Stream& stream) {
  return !is_external_stream(stream) && (stream.id() >> kIdIndexBits) == kSyncLaunchType;
}

vnpu::Stream& runtime_stream(const c10::Stream& stream) {
  const auto device = stream.device_index();
  check_device_index(device);
  const auto id = stream.id();
  if (id & kExternalStreamIdBit) return acl_stream(device, id);
  return lookup(device, runtime_index_of(id, device));
}

bool is_external_stream(const c10::Stream& stream) { return (stream.id() & kExternalStreamIdBit) != 0; }

vnpu::Stream* create_acl_stream(c10::DeviceIndex device, int priority) {
  device = resolve(device);
  check_device_index(device);
  std::shared_ptr<vnpu::Stream> stream =
      with_torch_errors([&] { return runtime_device(device).create_external_stream(priority); });
  AclStreams& streams = acl_streams();
  std::lock_guard<std::mutex> lock(streams.mutex);
  streams.by_index[device][stream->stream_index()] = stream;
  return stream.get();
}

bool destroy_acl_stream(void* handle) {
  std::shared_ptr<vnpu::Stream> stream;
  {
    AclStreams& streams = acl_streams();
    std::lock_guard<std::mutex> lock(streams.mutex);
    for (auto& by_index : streams.by_index) {
      for (auto it = by_index.begin(); it != by_index.end(); ++it) {
        if (it->second.get() == handle) {
          stream = std::move(it->second);
          by_index.erase(it);
          break;
        }
      }
      if (stream) break;
    }
  }
  if (!stream) return false;
  const auto device = static_cast<c10::DeviceIndex>(stream->device_index());
  // A thread whose current stream this was falls back to the default stream.
  if (t_current_stream[device] == (kExternalStreamIdBit | stream->stream_index())) t_current_stream[device] = 0;
  runtime_device(device).forget_external_stream(stream.get());
  // Its queued work still runs: the destructor drains the stream.
  return true;
}

std::optional<c10::Stream> stream_of_handle(const void* handle) {
  if (handle == nullptr) return std::nullopt;
  {
    AclStreams& streams = acl_streams();
    std::lock_guard<std::mutex> lock(streams.mutex);
    for (c10::DeviceIndex d = 0; d < kMaxDevices; ++d) {
      for (const auto& [index, stream] : streams.by_index[d]) {
        if (stream.get() == handle) {
          return c10::Stream(c10::Stream::UNSAFE, npu_device(d), kExternalStreamIdBit | index);
        }
      }
    }
  }
  // A torch-managed stream: compare pointers, never dereference the handle.
  for (c10::DeviceIndex d = 0; d < kMaxDevices; ++d) {
    for (int index = 0; index < kStreamsPerDevice; ++index) {
      if (g_streams[d][index].load(std::memory_order_acquire) == handle) {
        return c10::Stream(c10::Stream::UNSAFE, npu_device(d), stream_id_of_index(index));
      }
    }
  }
  return std::nullopt;
}

bool stream_idle(const c10::Stream& stream) { return runtime_stream(stream).query(); }

namespace {
std::atomic<int> g_host_dependent_work{0};
}  // namespace

void note_host_dependent_work(int delta) { g_host_dependent_work.fetch_add(delta, std::memory_order_acq_rel); }

bool host_dependent_work_pending() { return g_host_dependent_work.load(std::memory_order_acquire) > 0; }

void launch_host_task(const c10::Stream& stream, const char* name, std::function<void()> fn) {
  runtime_stream(stream).enqueue(vnpu::TaskKind::kHost, name, std::move(fn));
}

vnpu::Stream& current_runtime_stream(c10::DeviceIndex device) {
  // Fast path for kernel launches: the device index came from a live tensor,
  // so it is valid and the stream usually cached.
  const int32_t index = t_current_stream[device];
  if (index & kExternalStreamIdBit) return acl_stream(device, index);
  vnpu::Stream* stream = g_streams[device][index].load(std::memory_order_acquire);
  return stream != nullptr ? *stream : lookup(device, index);
}

c10::Stream current_stream(c10::DeviceIndex device) {
  device = resolve(device);
  check_device_index(device);
  const int32_t index = t_current_stream[device];
  return c10::Stream(c10::Stream::UNSAFE, npu_device(device),
                     (index & kExternalStreamIdBit) ? index : stream_id_of_index(index));
}

c10::Stream default_stream(c10::DeviceIndex device) {
  device = resolve(device);
  check_device_index(device);
  return c10::Stream(c10::Stream::UNSAFE, npu_device(device), 0);
}

c10::Stream new_stream(c10::DeviceIndex device, int priority) {
  device = resolve(device);
  const int index = runtime_device(device).next_pool_stream_index(priority);
  const c10::Stream stream(c10::Stream::UNSAFE, npu_device(device), stream_id_of_index(index));
  trace_stream(TraceKind::kStreamCreation, stream);
  return stream;
}

c10::Stream new_sync_launch_stream(c10::DeviceIndex device) {
  device = resolve(device);
  const int index = runtime_device(device).next_sync_launch_stream_index();
  const c10::Stream stream(c10::Stream::UNSAFE, npu_device(device), stream_id_of_index(index));
  trace_stream(TraceKind::kStreamCreation, stream);
  return stream;
}

c10::Stream communication_stream(c10::DeviceIndex device) {
  device = resolve(device);
  static std::mutex mutex;
  static std::map<c10::DeviceIndex, std::vector<int>> made;  // dedicated stream indices per device
  static std::map<c10::DeviceIndex, size_t> next;
  std::lock_guard<std::mutex> lock(mutex);
  auto& indices = made[device];
  if (indices.size() < static_cast<size_t>(vnpu::Device::kMaxDedicatedStreams)) {
    indices.push_back(with_torch_errors([&] { return runtime_device(device).create_dedicated_stream(); }));
    const c10::Stream stream(c10::Stream::UNSAFE, npu_device(device), stream_id_of_index(indices.back()));
    trace_stream(TraceKind::kStreamCreation, stream);
    return stream;
  }
  const int index = indices[next[device]++ % indices.size()];
  return c10::Stream(c10::Stream::UNSAFE, npu_device(device), stream_id_of_index(index));
}

void check_not_capturing(c10::DeviceIndex device, const char* what) {
  vnpu::Stream& stream = current_runtime_stream(device);
  if (stream.capturing()) with_torch_errors([&] { stream.check_not_capturing(what); });
}

void set_current_stream(const c10::Stream& stream) {
  runtime_stream(stream);  // validates
  const int64_t id = stream.id();
  t_current_stream[stream.device_index()] =
      static_cast<int32_t>((id & kExternalStreamIdBit) ? id : runtime_index_of(id, stream.device_index()));
}

void check_stream_id(int64_t id, c10::DeviceIndex device) {
  if (id > 0 && (id & kExternalStreamIdBit)) {
    runtime_stream(c10::Stream(c10::Stream::UNSAFE, npu_device(device), id));
    return;
  }
  NPU_CHECK_WITH(ValueError, ErrCode::kValue, runtime_index_or_negative(id) >= 0, "Invalid NPU stream id ", id,
                 ": ", stream_id_layout());
  runtime_stream(c10::Stream(c10::Stream::UNSAFE, npu_device(device), id));
}

void sleep_on_current_stream(int64_t microseconds) {
  NPU_CHECK_WITH(ValueError, ErrCode::kValue, microseconds >= 0, "_sleep expects a non-negative duration");
  vnpu::Stream& stream = current_runtime_stream(current_device());
  with_torch_errors([&] {
    stream.enqueue(vnpu::TaskKind::kHost, "_sleep", [microseconds] {
      std::this_thread::sleep_for(std::chrono::microseconds(microseconds));
    });
  });
}

struct StreamGate::State {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;
};

StreamGate::StreamGate() : state_(std::make_shared<State>()) {
  vnpu::Stream& stream = current_runtime_stream(current_device());
  with_torch_errors([&] {
    stream.enqueue(vnpu::TaskKind::kHost, "_StreamGate", [state = state_] {
      std::unique_lock<std::mutex> lock(state->mutex);
      state->cv.wait_for(lock, std::chrono::seconds(60), [&] { return state->open; });
    });
  });
}

StreamGate::~StreamGate() { open(); }

void StreamGate::open() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->open = true;
  state_->cv.notify_all();
}

void synchronize_device(c10::DeviceIndex device) {
  with_torch_errors([&] {
    // Capture error modes (npu_capture.h): refuse or skip capturing streams.
    const bool skip_capturing = device_sync_skips_captures();
    if (device >= 0) {
      runtime_device(device).synchronize(skip_capturing);
      return;
    }
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      if (is_initialized()) vnpu::Runtime::instance().device(d).synchronize(skip_capturing);
    }
  });
  trace(TraceKind::kDeviceSynchronization, device);
}

void synchronize_stream(const c10::Stream& stream) {
  with_torch_errors([&] { runtime_stream(stream).synchronize(); });
  trace_stream(TraceKind::kStreamSynchronization, stream);
}

}  // namespace torch_npu
