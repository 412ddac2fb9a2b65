#include "csrc/core/npu_device.h"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>

#include "csrc/core/npu_error.h"
#include <vnpu/runtime.h>

namespace torch_npu {
namespace {

// The advice real torch_npu gives with an invalid device ID (ACL error 107001).
constexpr const char* kCheckDeviceId = "Check whether the device ID is valid.";

thread_local c10::DeviceIndex t_current_device = -1;
std::atomic<bool> g_initialized{false};
std::atomic<bool> g_bad_fork{false};

// Stream workers do not survive fork(): a child that used the device
// before would wait forever on queues nobody drains. Refuse instead.
void mark_bad_fork_in_child() { g_bad_fork.store(g_initialized.load()); }
[[maybe_unused]] const int g_atfork_registered = pthread_atfork(nullptr, nullptr, &mark_bad_fork_in_child);

}  // namespace

// Before the first use of a device the runtime is not made yet, and the
// count follows the environment as the process holds it now (real torch_npu
// and CUDA do not cache the count before initialisation either): a script
// may set ASCEND_RT_VISIBLE_DEVICES after `import torch_npu`.
c10::DeviceIndex device_count() noexcept {
  if (vnpu::Runtime::instance_made()) {
    return static_cast<c10::DeviceIndex>(vnpu::Runtime::instance().device_count());
  }
  std::string error;
  return static_cast<c10::DeviceIndex>(
      vnpu::Runtime::planned_device_count(vnpu::environment_now(), &error));
}

std::string device_init_error() noexcept {
  if (vnpu::Runtime::instance_made()) return vnpu::Runtime::instance().init_error();
  std::string error;
  vnpu::Runtime::planned_device_count(vnpu::environment_now(), &error);
  return error;
}

bool is_in_bad_fork() noexcept { return g_bad_fork.load(); }

void check_not_forked() {
  NPU_CHECK_WITH(Error, ErrCode::kInternal, !g_bad_fork.load(std::memory_order_relaxed),
                 "Cannot re-initialize NPU in forked subprocess. To use NPU with multiprocessing, you must "
                 "use the 'spawn' start method");
}

namespace {

// The checks every device lookup makes first: not in a bad fork, and the
// runtime can be made from the environment. Returns the device count.
c10::DeviceIndex checked_device_count() {
  check_not_forked();
  // Once the runtime is made its init error and device count are fixed.
  // Every kernel's allocation passes here (twice): read them in place rather
  // than copy the message each time.
  if (C10_LIKELY(vnpu::Runtime::instance_made())) {
    const vnpu::Runtime& runtime = vnpu::Runtime::instance();
    NPU_CHECK_WITH(Error, ErrCode::kUnavail, runtime.init_error().empty(),
                   "The virtual NPU could not be initialised: ", runtime.init_error());
    return static_cast<c10::DeviceIndex>(runtime.device_count());
  }
  const auto& init_error = device_init_error();
  NPU_CHECK_WITH(Error, ErrCode::kUnavail, init_error.empty(),
                 "The virtual NPU could not be initialised: ", init_error);
  return device_count();
}

void check_device_in_range(int64_t device, c10::DeviceIndex count) {
  NPU_CHECK_WITH(Error, ErrCode::kParam, device >= 0 && device < count, "Invalid device ID ", device,
                 ": there are ", static_cast<int>(count), " NPU devices, valid device IDs are 0 to ",
                 static_cast<int>(count) - 1, ".\n", kCheckDeviceId);
}

}  // namespace

void check_device_index(c10::DeviceIndex index) {
  const auto count = checked_device_count();
  NPU_CHECK_WITH(Error, ErrCode::kParam, count > 0,
                 "No NPU device is available (VNPU_DEVICE_COUNT=0 or ASCEND_RT_VISIBLE_DEVICES is empty).");
  check_device_in_range(index, count);
}

vnpu::Device& runtime_device(c10::DeviceIndex index) {
  check_device_index(index);
  mark_initialized();
  return vnpu::Runtime::instance().device(index);
}

c10::DeviceIndex current_device() {
  if (t_current_device < 0) t_current_device = 0;
  return t_current_device;
}

c10::DeviceIndex checked_device_index(int64_t device) {
  check_device_in_range(device, checked_device_count());
  return static_cast<c10::DeviceIndex>(device);
}

c10::DeviceIndex resolve_device_index(int64_t device) {
  if (device == -1) {
    const c10::DeviceIndex index = current_device();
    check_device_index(index);
    return index;
  }
  check_device_index(0);  // the environment and fork checks, with their messages
  return checked_device_index(device);
}

c10::DeviceIndex current_device_or_minus_one() noexcept { return t_current_device; }

void set_current_device(c10::DeviceIndex index) {
  // As aclrtSetDevice, which initialises the device: the runtime is made here
  // if it was not (its environment warnings, such as ACL_OP_INIT_MODE's,
  // print then, as CANN's do at aclInit).
  runtime_device(index);
  t_current_device = index;
}

DeviceProperties device_properties(c10::DeviceIndex index) {
  vnpu::Device& d = runtime_device(index);
  const vnpu::ChipProfile& p = d.profile();
  DeviceProperties out;
  out.name = p.name;
  out.soc_version = p.soc_version;
  out.total_memory = d.memory().capacity();
  out.cube_core_num = p.cube_core_num;
  out.vector_core_num = p.vector_core_num;
  out.l2_cache_size = p.l2_cache_bytes;
  out.major = p.capability_major;
  out.minor = p.capability_minor;
  out.supports_bf16 = p.supports_bf16;
  out.physical_id = d.physical_id();
  return out;
}

std::pair<uint64_t, uint64_t> device_memory_info(c10::DeviceIndex index) {
  vnpu::Device& d = runtime_device(index);
  return {d.memory().free_bytes(), d.memory().capacity()};
}

int device_utilization(c10::DeviceIndex index) {
  const vnpu::BusyClock& clock = runtime_device(index).busy_clock();
  static std::mutex mutex;
  static std::array<std::pair<int64_t, int64_t>, kMaxDevices> previous{};  // (time, busy); time 0: none
  const int64_t now = vnpu::steady_now_ns();
  const int64_t busy = clock.busy_ns();
  std::lock_guard<std::mutex> lock(mutex);
  auto& [then, busy_then] = previous[index];
  if (then == 0) then = clock.created_ns();
  const int64_t window = now - then;
  const int64_t busy_in_window = busy - busy_then;
  then = now;
  busy_then = busy;
  if (window <= 0) return 0;
  return static_cast<int>(std::clamp<int64_t>((100 * busy_in_window + window / 2) / window, 0, 100));
}

int64_t device_busy_ns(c10::DeviceIndex index) { return runtime_device(index).busy_clock().busy_ns(); }

bool device_was_used(c10::DeviceIndex index) {
  check_device_index(index);
  return is_initialized() && !vnpu::Runtime::instance().device(index).created_streams().empty();
}

bool is_initialized() noexcept { return g_initialized.load(std::memory_order_relaxed); }
void mark_initialized() noexcept { g_initialized.store(true, std::memory_order_relaxed); }

}  // namespace torch_npu
