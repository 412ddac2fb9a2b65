// The two stages of an npu kernel (see docs/architecture.md, "Op execution").
//
// Stage 1 runs on the calling thread inside the PrivateUse1 kernel: it finds
// the op's device, checks arguments, infers and allocates outputs, then
// calls launch() with a small callable. Stage 2 is that callable, run later
// by the worker of the device's current stream: it builds CPU views of the
// device buffers (TensorRef::view) and runs ATen's CPU kernel into them.
#pragma once

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <optional>
#include <utility>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"
#include "csrc/ops/tensor_ref.h"

namespace torch_npu {

// --- device of an op ------------------------------------------------------

// Folds one argument into the op's device: npu tensors must all be on the
// same npu device; CPU tensors are allowed only as 0-dim scalars (as CUDA).
class DeviceCheck {
 public:
  // allow_cpu: CPU tensors of any shape are accepted (ATen ops declared
  // device_check: NoCheck, such as indexing with CPU index tensors).
  explicit DeviceCheck(const char* op, bool allow_cpu = false) : op_(op), allow_cpu_(allow_cpu) {}
  void add(const at::Tensor& t);
  void add(const std::optional<at::Tensor>& t) { if (t.has_value()) add(*t); }
  void add(at::ITensorListRef list) { for (const auto& t : list) add(t); }
  void add(const c10::List<std::optional<at::Tensor>>& list) {
    for (const std::optional<at::Tensor>& t : list) add(t);
  }
  // The npu device all tensors agreed on.
  c10::DeviceIndex device() const;

 private:
  const char* op_;
  bool allow_cpu_;
  c10::DeviceIndex device_ = -1;
};

template <typename... Args>
c10::DeviceIndex common_device(const char* op, const Args&... args) {
  DeviceCheck check(op);
  (check.add(args), ...);
  return check.device();
}

template <typename... Args>
c10::DeviceIndex common_device_allowing_cpu(const char* op, const Args&... args) {
  DeviceCheck check(op, /*allow_cpu=*/true);
  (check.add(args), ...);
  return check.device();
}

// --- outputs --------------------------------------------------------------

// A new npu tensor on `device`. Empty `strides` means contiguous in the
// options' memory format.
at::Tensor empty_npu(c10::IntArrayRef sizes, c10::IntArrayRef strides,
                     const c10::TensorOptions& options, c10::DeviceIndex device);

// The allocator that places blocks on `device` (current stream of that
// device), whatever the thread's current device is.
c10::Allocator* device_allocator(c10::DeviceIndex device);

// Grows or shrinks the bytes of an npu storage (Storage.resize_, resize_):
// a new block, old contents copied over in stream order.
void resize_storage_bytes(const c10::Storage& storage, size_t new_bytes);

// --- stage 2 --------------------------------------------------------------

// Runs on the stream worker around every kernel: no autograd, and ATen
// errors converted to plain exceptions the runtime records as sticky errors.
// `work` is the element count of the largest tensor the op touches.
void run_stage_two(const char* op, int64_t work, void (*body)(void*), void* callable);

// Enqueues `fn` on the current stream of `device`.
template <typename F>
void launch(c10::DeviceIndex device, const char* op, F&& fn) {
  check_not_forked();
  const int64_t work = take_launch_work();
  vnpu::Stream& stream = current_runtime_stream(device);
  try {
    stream.enqueue(op, [op, work, fn = std::forward<F>(fn)]() mutable {
      run_stage_two(op, work, [](void* p) { (*static_cast<std::decay_t<F>*>(p))(); }, &fn);
    });
  } catch (const vnpu::Error& e) {
    throw_runtime_error(e);
  }
}

// Ops whose result the host needs now (item, D2H copies, data-dependent
// shapes) wait for the device's current stream and report its errors.
void sync_current_stream(c10::DeviceIndex device);

// torch.npu.set_sync_debug_mode: 0 silent, 1 warn, 2 error at every
// sync_current_stream (implicit synchronisation).
void set_sync_debug_mode(int mode);
int sync_debug_mode();

}  // namespace torch_npu
