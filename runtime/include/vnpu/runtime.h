// Runtime: the registry of virtual devices (registry -> device -> stream).
//
// Device count comes from VNPU_DEVICE_COUNT (default 8), filtered and
// renumbered by ASCEND_RT_VISIBLE_DEVICES like CUDA_VISIBLE_DEVICES. Each
// device has a chip profile (VNPU_CHIP), device memory with the profile's
// capacity (or VNPU_DEVICE_MEMORY_MB), a default stream (index 0) and a pool
// of additional streams created on demand, and owns its caching allocators
// (DeviceAllocator) over its memory; the runtime owns the allocators'
// options (AllocSettings), one set for every device.
//
// Configuration errors (a bad VNPU_DEVICE_COUNT, a visible device that does
// not exist, a bad TASK_QUEUE_ENABLE) do not throw from device_count(): it
// returns 0 and init_error() says why; device(i) throws that message.
//
// Thread-safety: all methods may be called from any thread. Devices and
// streams live until process exit (streams are never destroyed while tasks
// may refer to them).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vnpu/alloc_settings.h"
#include "vnpu/chip_profile.h"
#include "vnpu/device_memory.h"
#include "vnpu/environment.h"
#include "vnpu/busy_clock.h"
#include "vnpu/stream.h"

namespace vnpu {

class DeviceAllocator;

class Device {
 public:
  // Stream indices on a device, in this order: 0, the default stream; two
  // pools a device hands out round-robin, one per priority (like CUDA's and
  // torch_npu's per-device pools): normal 1..kStreamsPerPool, high after it;
  // kSyncLaunchStreams streams whose tasks run as they are launched
  // (torch_npu's sync-launch streams, torch.npu.Stream(is_sync_launch=True));
  // then dedicated streams (collectives' communication streams), outside the
  // round robins.
  static constexpr int kStreamsPerPool = 32;
  static constexpr int kStreamPoolSize = 2 * kStreamsPerPool;
  static constexpr int kFirstSyncLaunchIndex = kStreamPoolSize + 1;
  static constexpr int kSyncLaunchStreams = 4;
  static constexpr int kFirstDedicatedIndex = kFirstSyncLaunchIndex + kSyncLaunchStreams;
  static constexpr int kMaxDedicatedStreams = 16;
  static constexpr int kMaxStreamIndex = kFirstDedicatedIndex + kMaxDedicatedStreams - 1;

  // `settings` (the allocators' options) must outlive the device;
  // `caching` false: PYTORCH_NO_NPU_MEMORY_CACHING=1.
  Device(int index, int physical_id, ChipProfile profile, std::uint64_t capacity_bytes,
         bool synchronous, const AllocSettings& settings, bool caching = true);
  ~Device();

  int index() const { return index_; }
  int physical_id() const { return physical_id_; }  // id before ASCEND_RT_VISIBLE_DEVICES
  const ChipProfile& profile() const { return profile_; }
  DeviceMemory& memory() { return memory_; }
  // The caching allocators over memory() (device_allocator.h).
  DeviceAllocator& allocator() { return *allocator_; }
  // How long any of its streams had work running (utilization).
  const BusyClock& busy_clock() const { return busy_; }

  // Stream 0 is the default stream; pool and sync-launch streams are created
  // on first use; dedicated streams exist once create_dedicated_stream() made
  // them. Throws Error(kInvalidValue) for any other index.
  Stream& stream(int stream_index);
  // Makes a new dedicated stream and returns its index. Throws
  // Error(kInvalidValue) once kMaxDedicatedStreams exist.
  int create_dedicated_stream();
  // Next stream of the priority's pool (high for priority < 0), round-robin
  // (for torch.npu.Stream()).
  int next_pool_stream_index(int priority);
  // Next sync-launch stream, round-robin.
  int next_sync_launch_stream_index();
  // Streams created so far (for device-wide synchronize).
  std::vector<Stream*> created_streams();

  // A stream outside the pool and the dedicated streams, for the ACL runtime
  // API (aclrtCreateStream): its index is above kMaxStreamIndex and unique on
  // the device. The device synchronizes it with its own streams until
  // forget_external_stream(), which waits for its queued work and moves the
  // allocators' blocks that refer to it to the default stream (see
  // CachingAllocator::retire_stream); the caller's pointer keeps it alive
  // after that, and must not queue work on it any more.
  std::shared_ptr<Stream> create_external_stream(int priority);
  void forget_external_stream(const Stream* stream);

  // Blocks until every stream of the device is idle; reports the first
  // sticky error found (after draining all streams). A capturing stream
  // throws Error(kStreamCapture) (its captured work never runs), unless
  // `skip_capturing`: then only the work it queued before its capture is
  // waited for (capture error modes "thread_local" and "relaxed").
  void synchronize(bool skip_capturing = false);

 private:
  const int index_;
  const int physical_id_;
  const ChipProfile profile_;
  const bool synchronous_;
  DeviceMemory memory_;
  std::unique_ptr<DeviceAllocator> allocator_;  // after memory_: its segments go back before memory_ goes
  BusyClock busy_;  // before streams_: they report to it until they are gone
  std::mutex mutex_;
  std::vector<std::unique_ptr<Stream>> streams_;  // index -> stream (lazily filled)
  int next_pool_[2] = {0, 0};  // per priority: the last index handed out, within the pool
  int next_sync_launch_ = 0;
  int dedicated_ = 0;  // dedicated streams made so far
  std::vector<std::shared_ptr<Stream>> external_streams_;  // guarded by mutex_
  int next_external_index_ = kMaxStreamIndex + 1;          // guarded by mutex_
};

class Runtime {
 public:
  // The process's runtime, made at the first call (the first use of a
  // device) from the environment as it is then (environment_now()).
  static Runtime& instance();
  // Whether instance() has been made.
  static bool instance_made();
  // The device count, and the init error ("" when none), of a runtime made
  // from `env`, without making one: device counts asked for before the
  // first use of a device follow ASCEND_RT_VISIBLE_DEVICES as it is then.
  static int planned_device_count(const Environment& env, std::string* error);

  int device_count() const { return static_cast<int>(devices_.size()); }
  // Non-empty when the environment is invalid; device_count() is then 0.
  const std::string& init_error() const { return init_error_; }

  // Throws Error(kInvalidDevice) naming the valid range, or the init error.
  Device& device(int index);

  // Device whose memory holds ptr, or -1.
  int device_of_pointer(const void* ptr) const;

  // The caching allocators' options (alloc_settings.h).
  const AllocSettings& alloc_settings() const { return alloc_settings_; }

  // IEEE inf/nan arithmetic (true) or saturation mode (Environment::inf_nan_mode).
  bool inf_nan_mode() const { return inf_nan_mode_; }
  // Changes the options `text` names for every device's allocators, those
  // made so far and those to come, and returns them. Throws Error as
  // AllocSettings::apply does, changing nothing.
  AllocConfig set_alloc_config(const std::string& text, const std::string& variable);

  // Builds a runtime from an explicit environment (tests).
  explicit Runtime(const Environment& env);
  // Drains every stream of every device before any is destroyed, so that a
  // stream-wait-event task never waits on a stream that is already gone.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

 private:
  AllocSettings alloc_settings_;  // before devices_: their allocators read it
  std::vector<std::unique_ptr<Device>> devices_;
  std::string init_error_;
  bool inf_nan_mode_ = true;
  std::mutex alloc_settings_mutex_;  // one set_alloc_config at a time
};

}  // namespace vnpu
