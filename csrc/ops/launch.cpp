#include "csrc/ops/launch.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <ATen/core/LegacyTypeDispatch.h>

#include <atomic>
#include <memory>
#include <stdexcept>

#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"
#include "runtime/include/vnpu/environment.h"

namespace torch_npu {

void DeviceCheck::add(const at::Tensor& t) {
  if (!t.defined()) return;
  const c10::Device d = t.device();
  if (d.type() == c10::DeviceType::PrivateUse1) {
    if (device_ < 0) {
      device_ = d.index();
    } else {
      TORCH_CHECK(d.index() == device_,
                  "Expected all tensors to be on the same device, but found at least two devices, npu:",
                  static_cast<int>(device_), " and npu:", static_cast<int>(d.index()), "! (when checking arguments for ",
                  op_, ")");
    }
    return;
  }
  TORCH_CHECK(d.is_cpu() && (t.dim() == 0 || allow_cpu_),
              "Expected all tensors to be on the same device, but found at least two devices, npu and ",
              d.str(), "! (when checking arguments for ", op_, ")");
}

c10::DeviceIndex DeviceCheck::device() const {
  TORCH_CHECK(device_ >= 0, op_, ": expected at least one npu tensor argument");
  return device_;
}

namespace {

// One allocator object per device, so stage 1 allocates on the op's device
// without switching the thread's current device.
class DeviceBoundAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    const c10::DeviceIndex saved = current_device();
    if (saved == device_) return npu_caching_allocator()->allocate(bytes);
    set_current_device(device_);
    c10::DataPtr ptr;
    try {
      ptr = npu_caching_allocator()->allocate(bytes);
    } catch (...) {
      set_current_device(saved);
      throw;
    }
    set_current_device(saved);
    return ptr;
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    npu_caching_allocator()->copy_data(dest, src, count);
  }
  c10::DeviceIndex device_ = 0;
};

}  // namespace

c10::Allocator* device_allocator(c10::DeviceIndex device) {
  // Built once (thread-safe static init); read-only afterwards.
  static const auto allocators = [] {
    auto all = std::make_unique<DeviceBoundAllocator[]>(kMaxDevices);
    for (int d = 0; d < kMaxDevices; ++d) all[d].device_ = static_cast<c10::DeviceIndex>(d);
    return all;
  }();
  return &allocators[device];
}

at::Tensor empty_npu(c10::IntArrayRef sizes, c10::IntArrayRef strides,
                     const c10::TensorOptions& options, c10::DeviceIndex device) {
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  const auto dtype = c10::typeMetaToScalarType(options.dtype());
  c10::Allocator* allocator = device_allocator(device);
  if (strides.empty()) {
    return at::detail::empty_generic(sizes, allocator, keys, dtype, options.memory_format_opt());
  }
  return at::detail::empty_strided_generic(sizes, strides, allocator, keys, dtype);
}

namespace {

// OpenMP's per-thread team size (the runtime is already loaded by torch).
extern "C" int omp_get_max_threads();
extern "C" void omp_set_num_threads(int);

// Below this many elements a kernel runs on the worker alone. Small kernels
// gain little from intra-op threads, and on a machine with few cores those
// threads compete with the host thread that keeps enqueueing work (one
// parallel region per small op then costs tens of microseconds).
constexpr int64_t kSerialWorkElements = 32768;  // ATen's GRAIN_SIZE

// Runs stage 2 of one op with one intra-op thread when it is small.
class IntraOpThreads {
 public:
  explicit IntraOpThreads(int64_t work) {
    if (work >= 0 && work < kSerialWorkElements) {
      saved_ = omp_get_max_threads();
      if (saved_ > 1) omp_set_num_threads(1);
    }
  }
  ~IntraOpThreads() {
    if (saved_ > 1) omp_set_num_threads(saved_);
  }

 private:
  int saved_ = 0;
};

}  // namespace

void run_stage_two(const char* op, int64_t work, void (*body)(void*), void* callable) {
  // Views of device memory are plain CPU tensors: skip autograd and
  // ADInplaceOrView, the caller's autograd already recorded this op.
  at::AutoDispatchBelowADInplaceOrView no_autograd;
  IntraOpThreads threads(work);
  try {
    body(callable);
  } catch (c10::Error& e) {
    // Inline (ASCEND_LAUNCH_BLOCKING=1): the caller gets ATen's own error,
    // of its own type, naming the npu op it came from.
    if (vnpu::environment().synchronous_launch()) {
      e.add_context(std::string("while running ") + op + " on the NPU");
      throw;
    }
    // Queued: the runtime keeps the text as the stream's sticky error.
    throw std::runtime_error(e.what_without_backtrace());
  }
}

namespace {
std::atomic<int> g_sync_debug_mode{0};
}  // namespace

void set_sync_debug_mode(int mode) { g_sync_debug_mode.store(mode); }
int sync_debug_mode() { return g_sync_debug_mode.load(); }

void sync_current_stream(c10::DeviceIndex device) {
  const int mode = g_sync_debug_mode.load(std::memory_order_relaxed);
  if (mode == 1) {
    TORCH_WARN("called a synchronizing NPU operation");
  } else if (mode == 2) {
    TORCH_CHECK(false, "called a synchronizing NPU operation");
  }
  try {
    current_runtime_stream(device).synchronize();
  } catch (const vnpu::Error& e) {
    throw_runtime_error(e);
  }
}

}  // namespace torch_npu
