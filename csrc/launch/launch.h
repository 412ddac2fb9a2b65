// The two stages of an npu kernel (see docs/architecture.md, "Op execution").
//
// Stage 1 runs on the calling thread inside the PrivateUse1 kernel: it finds
// the op's device (device_check.h), checks arguments, infers and allocates
// outputs (npu_empty.h), then calls launch() with the outputs and a small
// callable. Stage 2 is that callable, run later by the worker of the
// device's current stream: it builds CPU views of the device buffers
// (TensorRef::view) and runs ATen's CPU kernel into them.
//
// This header is included by every kernel, the generated ones too, so it
// depends on no stream, error or environment header: launch() hands the
// kernel to launch.cpp as a vnpu::ErasedCallable.
//
// Note [Argument errors raise at the call]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Many of ATen's argument checks live in the CPU kernel itself (dtype
// support: gelu on bool, mm of int64 and float32, float8 arithmetic), so a
// queued kernel would raise them only at a later, unrelated sync point. The
// first launch of an op with a given *signature* (the dtypes, ranks and
// devices of its tensor arguments) on a thread therefore runs stage 2 on the
// caller, in stream order (Stream::run_on_caller): ATen's own exception, of
// its own type, raises at the call, exactly as on the CPU. Once a signature
// passed, later launches with it are queued. Errors that depend on values
// (an index out of range) are device-side errors, reported asynchronously
// as on CUDA. A first launch waits for its stream to drain.
#pragma once

#include <ATen/core/Tensor.h>

#include <type_traits>
#include <utility>

#include "csrc/launch/device_check.h"
#include "csrc/launch/kernel_outputs.h"
#include "csrc/launch/npu_empty.h"
#include "csrc/launch/tensor_ref.h"
#include <vnpu/erased_callable.h>

namespace torch_npu {

// How stage 2 runs: queued on the worker (errors are recorded, outputs
// poisoned), or on the caller (errors propagate as ATen raised them).
enum class StageTwoMode { kQueued, kOnCaller };

// Runs on the stream worker (or the caller) around every kernel: no
// autograd, the intra-op thread count for the op's size, and errors
// handled per `mode`. `work` is the element count of the largest tensor the
// op touches; `outputs` may be null (nothing to poison).
void run_stage_two(const char* op, int64_t work, StageTwoMode mode, const KernelOutputs* outputs,
                   void (*body)(void*), void* callable);

// What launch.cpp needs of a kernel task, whatever its stage-2 callable.
struct KernelTaskBase {
  const char* op;
  int64_t work;
  KernelOutputs outputs;
  StageTwoMode mode = StageTwoMode::kQueued;
};

// A kernel task must fit a queue slot inline (no heap box per launch).
constexpr size_t kKernelTaskBudgetBytes = vnpu::kTaskInlineBytes;

template <typename Fn>
struct KernelTask : KernelTaskBase {
  Fn fn;
  void operator()() {
    run_stage_two(op, work, mode, &outputs, [](void* p) { (*static_cast<Fn*>(p))(); }, &fn);
  }
};

// Runs `task` on the caller (first launch of `signature`) or moves it onto
// the current stream of `device`.
void submit_kernel(c10::DeviceIndex device, const LaunchSnapshot& snap, KernelTaskBase& task,
                   const vnpu::ErasedCallable& callable);
// Always moves `task` onto the current stream of `device`, first launch too:
// for tasks whose arguments stage 1 checked fully and that must never block
// the caller (a collective waits for its peers on the stream).
void submit_queued_kernel(c10::DeviceIndex device, KernelTaskBase& task, const vnpu::ErasedCallable& callable);

// Enqueues `fn` on the current stream of `device`; `snap` is what its
// tensor arguments say about it (LaunchSnapshot, tensor_ref.h); `op` names it: the aten
// op it runs ("relu", "add.Tensor") or a task name, as a string that lives as
// long as the process (strict mode keys on its address); `outputs` are what it
// writes (poisoned if it fails on the stream). A task must fit a queue slot
// (checked at compile time) unless the kernel says it may be boxed
// (kMayBox: a few rare kernels with many tensor arguments).
template <bool kMayBox = false, typename F>
void launch(c10::DeviceIndex device, const char* op, KernelOutputs outputs, const LaunchSnapshot& snap, F&& fn) {
  using Fn = std::decay_t<F>;
  KernelTask<Fn> task{{op, snap.work(), std::move(outputs)}, Fn(std::forward<F>(fn))};
  // Bigger tasks still work, boxed on the heap, but cost an allocation each.
  static_assert(kMayBox || sizeof(KernelTask<Fn>) <= kKernelTaskBudgetBytes,
                "this kernel's captures make its task too big for a queue slot: capture less");
  submit_kernel(device, snap, task, vnpu::erase(task));
}

// launch() without the first launch on the caller (see submit_queued_kernel).
template <typename F>
void launch_queued(c10::DeviceIndex device, const char* op, KernelOutputs outputs, const LaunchSnapshot& snap,
                   F&& fn) {
  using Fn = std::decay_t<F>;
  KernelTask<Fn> task{{op, snap.work(), std::move(outputs)}, Fn(std::forward<F>(fn))};
  submit_queued_kernel(device, task, vnpu::erase(task));
}

// Runs `fn` as stage 2 right now on the calling thread, outside any stream:
// for work whose streams the caller saw idle and that must not pay a queue
// round trip (small collectives, Note [Small collectives on idle streams
// run on the caller] in csrc/distributed/process_group_hccl.cpp). Errors
// propagate as raised, and poison `outputs`. With launch() and
// launch_queued(), the only ways into stage 2.
template <typename F>
void launch_on_caller(const char* op, KernelOutputs outputs, const LaunchSnapshot& snap, F&& fn) {
  using Fn = std::decay_t<F>;
  KernelTask<Fn> task{{op, snap.work(), std::move(outputs), StageTwoMode::kOnCaller}, Fn(std::forward<F>(fn))};
  try {
    task();
  } catch (...) {
    task.outputs.poison();
    throw;
  }
}

}  // namespace torch_npu
