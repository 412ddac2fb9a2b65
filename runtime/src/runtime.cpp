#include "vnpu/runtime.h"

#include <cstdio>

#include <atomic>
#include <exception>
#include <set>

#include "vnpu/device_allocator.h"
#include "vnpu/error.h"
#include "vnpu/shared_arena.h"

namespace vnpu {
namespace {

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n";
  const auto begin = s.find_first_not_of(ws);
  if (begin == std::string::npos) return "";
  const auto end = s.find_last_not_of(ws);
  return s.substr(begin, end - begin + 1);
}

std::string existing_devices(int device_count) {
  if (device_count == 0) return "no devices exist (VNPU_DEVICE_COUNT=0)";
  return "only devices 0-" + std::to_string(device_count - 1) +
         " exist (VNPU_DEVICE_COUNT=" + std::to_string(device_count) + ")";
}

// Parses ASCEND_RT_VISIBLE_DEVICES into physical ids. An empty value hides
// every device, like CUDA_VISIBLE_DEVICES="". Returns "" on success, else
// the error message.
std::string parse_visible_devices(const std::string& raw, int device_count,
                                  std::vector<int>* physical_ids) {
  const std::string value = trim(raw);
  if (value.empty()) return "";
  std::set<int> seen;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = value.find(',', start);
    const std::string item =
        trim(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    // Digits only; at most 6 of them so the value fits in an int.
    bool numeric = !item.empty() && item.size() <= 6;
    for (char c : item) numeric = numeric && c >= '0' && c <= '9';
    if (!numeric) {
      return "ASCEND_RT_VISIBLE_DEVICES must be a comma-separated list of device indices, got '" +
             raw + "'";
    }
    const int id = std::stoi(item);
    if (id >= device_count) {
      return "ASCEND_RT_VISIBLE_DEVICES names device " + std::to_string(id) + ", but " +
             existing_devices(device_count);
    }
    if (!seen.insert(id).second) {
      return "ASCEND_RT_VISIBLE_DEVICES names device " + std::to_string(id) + " more than once";
    }
    physical_ids->push_back(id);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return "";
}

}  // namespace

// ---------------------------------------------------------------- Device

Device::Device(int index, int physical_id, ChipProfile profile, std::uint64_t capacity_bytes,
               bool synchronous, const AllocSettings& settings, bool caching)
    : index_(index),
      physical_id_(physical_id),
      profile_(std::move(profile)),
      synchronous_(synchronous),
      memory_(index, capacity_bytes),
      allocator_(std::make_unique<DeviceAllocator>(memory_, settings, caching)),
      streams_(kMaxStreamIndex + 1) {}

Device::~Device() = default;

Stream& Device::stream(int stream_index) {
  if (stream_index < 0 || stream_index > kMaxStreamIndex) {
    throw Error(ErrorCode::kInvalidValue,
                "Invalid stream index " + std::to_string(stream_index) + " on NPU " +
                    std::to_string(index_) + ": valid indices are 0 to " +
                    std::to_string(kFirstDedicatedIndex - 1) + " (and dedicated streams)");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<Stream>& slot = streams_[static_cast<std::size_t>(stream_index)];
  if (!slot) {
    if (stream_index >= kFirstDedicatedIndex) {
      throw Error(ErrorCode::kInvalidValue, "NPU " + std::to_string(index_) + " has no dedicated stream " +
                                                std::to_string(stream_index) + " (none was created)");
    }
    const bool high_priority = stream_index > kStreamsPerPool && stream_index <= kStreamPoolSize;
    const bool sync_launch = stream_index >= kFirstSyncLaunchIndex;
    slot = std::make_unique<Stream>(index_, stream_index, high_priority ? -1 : 0, synchronous_ || sync_launch,
                                    &busy_);
  }
  return *slot;
}

int Device::create_dedicated_stream() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (dedicated_ == kMaxDedicatedStreams) {
    throw Error(ErrorCode::kInvalidValue, "NPU " + std::to_string(index_) + " already has " +
                                              std::to_string(kMaxDedicatedStreams) + " dedicated streams");
  }
  const int stream_index = kFirstDedicatedIndex + dedicated_++;
  streams_[static_cast<std::size_t>(stream_index)] =
      std::make_unique<Stream>(index_, stream_index, /*priority=*/0, synchronous_, &busy_);
  return stream_index;
}

int Device::next_pool_stream_index(int priority) {
  // The virtual device does not schedule by priority; the pools are kept
  // apart because a stream's id names its priority (torch_npu's layout).
  const int pool = priority < 0 ? 1 : 0;
  std::lock_guard<std::mutex> lock(mutex_);
  next_pool_[pool] = next_pool_[pool] % kStreamsPerPool + 1;
  return pool * kStreamsPerPool + next_pool_[pool];
}

int Device::next_sync_launch_stream_index() {
  std::lock_guard<std::mutex> lock(mutex_);
  const int index = kFirstSyncLaunchIndex + next_sync_launch_;
  next_sync_launch_ = (next_sync_launch_ + 1) % kSyncLaunchStreams;
  return index;
}

std::vector<Stream*> Device::created_streams() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Stream*> out;
  for (const auto& stream : streams_) {
    if (stream) out.push_back(stream.get());
  }
  return out;
}

std::shared_ptr<Stream> Device::create_external_stream(int priority) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto stream = std::make_shared<Stream>(index_, next_external_index_++, priority, synchronous_, &busy_);
  external_streams_.push_back(stream);
  return stream;
}

void Device::forget_external_stream(const Stream* stream) {
  std::shared_ptr<Stream> forgotten;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = external_streams_.begin(); it != external_streams_.end(); ++it) {
      if (it->get() == stream) {
        forgotten = std::move(*it);
        external_streams_.erase(it);
        break;
      }
    }
  }
  if (!forgotten) return;
  // The caching allocators keep the stream of each segment and of each
  // record_stream use; once the stream has run its work, hand those to the
  // default stream, so that no block outlives the stream it points to.
  try {
    forgotten->wait_completed(forgotten->last_enqueued());
  } catch (const Error&) {
    // Aborted, or made before fork(): no queued work of it will run.
  }
  allocator_->retire_stream(*forgotten, this->stream(0));
}

void Device::synchronize(bool skip_capturing) {
  // Drain every stream before reporting, so that after an error the device
  // is still idle when the caller regains control.
  std::exception_ptr first_error;
  std::vector<std::shared_ptr<Stream>> external;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    external = external_streams_;  // kept alive while we wait on them
  }
  std::vector<Stream*> streams = created_streams();
  for (const auto& stream : external) streams.push_back(stream.get());
  for (Stream* stream : streams) {
    // A capturing stream's captured work has not run: wait only for what it
    // queued before its capture began (its errors reach its own next sync).
    if (skip_capturing && stream->capturing()) {
      stream->wait_completed(stream->last_enqueued());
      continue;
    }
    try {
      stream->synchronize();
    } catch (const Error&) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

// ---------------------------------------------------------------- Runtime

namespace {

// The chip and the physical ids of the devices `env` asks for; returns ""
// on success, else the error that leaves the runtime without devices.
std::string resolve_devices(const Environment& env, const ChipProfile** profile,
                            std::vector<int>* physical_ids) {
  std::string error;
  for (const std::string& e : env.errors) {
    if (!error.empty()) error += "; ";
    error += e;
  }
  if (!error.empty()) return error;

  const std::string chip = env.chip_name.empty() ? default_chip_name() : env.chip_name;
  *profile = find_chip_profile(chip);
  if (*profile == nullptr) return "unknown chip '" + chip + "'";

  if (env.visible_devices) return parse_visible_devices(*env.visible_devices, env.device_count, physical_ids);
  for (int i = 0; i < env.device_count; ++i) physical_ids->push_back(i);
  return "";
}

std::atomic<bool> g_instance_made{false};

}  // namespace

Runtime::Runtime(const Environment& env) : alloc_settings_(env), inf_nan_mode_(env.inf_nan_mode) {
  const ChipProfile* profile = nullptr;
  std::vector<int> physical_ids;
  init_error_ = resolve_devices(env, &profile, &physical_ids);
  if (!init_error_.empty()) return;

  const std::uint64_t capacity = env.device_memory_bytes.value_or(profile->total_memory_bytes);
  const bool synchronous = env.synchronous_launch();
  for (std::size_t i = 0; i < physical_ids.size(); ++i) {
    devices_.push_back(std::make_unique<Device>(static_cast<int>(i), physical_ids[i], *profile,
                                                capacity, synchronous, alloc_settings_,
                                                !env.no_memory_caching));
  }
  if (env.shared_device_memory) {
    // Before any allocation. If the memfd cannot be made, the devices keep
    // host memory: collectives then copy through the transport's buffers.
    try {
      const std::shared_ptr<SharedArena> arena = shared_arena();
      for (const auto& device : devices_) device->memory().set_arena(arena);
    } catch (const std::runtime_error&) {
    }
  }
}

Runtime::~Runtime() {
  for (const auto& device : devices_) {
    for (Stream* stream : device->created_streams()) stream->wait_completed(stream->last_enqueued());
  }
}

AllocConfig Runtime::set_alloc_config(const std::string& text, const std::string& variable) {
  std::lock_guard<std::mutex> lock(alloc_settings_mutex_);  // devices see changes in order
  const AllocConfig config = alloc_settings_.apply(text, variable);
  for (const auto& device : devices_) device->allocator().set_config(config);
  return config;
}

Runtime& Runtime::instance() {
  // Leaked on purpose: tensors owned by Python objects and by the adaptor's
  // static caches are freed during interpreter shutdown, after function-level
  // statics would already be destroyed. The OS reclaims the memory.
  static Runtime* runtime = [] {
    const Environment env = vnpu::environment_now();
    // Values replaced by their default are told once, when the devices are made.
    for (const std::string& warning : env.warnings) std::fprintf(stderr, "[W] Warning: %s\n", warning.c_str());
    Runtime* made = new Runtime(env);
    g_instance_made.store(true, std::memory_order_release);
    return made;
  }();
  return *runtime;
}

bool Runtime::instance_made() { return g_instance_made.load(std::memory_order_acquire); }

int Runtime::planned_device_count(const Environment& env, std::string* error) {
  const ChipProfile* profile = nullptr;
  std::vector<int> physical_ids;
  *error = resolve_devices(env, &profile, &physical_ids);
  return error->empty() ? static_cast<int>(physical_ids.size()) : 0;
}

Device& Runtime::device(int index) {
  if (!init_error_.empty()) throw Error(ErrorCode::kInvalidValue, init_error_);
  const int count = device_count();
  if (index < 0 || index >= count) {
    std::string message = "Invalid device index " + std::to_string(index) + ": vNPU has ";
    if (count == 0) {
      message += "no devices";
    } else {
      message += std::to_string(count) + (count == 1 ? " device" : " devices") +
                 ", valid indices are 0 to " + std::to_string(count - 1);
    }
    throw Error(ErrorCode::kInvalidDevice, message);
  }
  return *devices_[static_cast<std::size_t>(index)];
}

int Runtime::device_of_pointer(const void* ptr) const {
  if (ptr == nullptr) return -1;
  for (const auto& device : devices_) {
    if (device->memory().owns(ptr)) return device->index();
  }
  return -1;
}

}  // namespace vnpu
