// The two stages of an npu kernel (see docs/architecture.md, "Op execution").
//
// Stage 1 runs on the calling thread inside the PrivateUse1 kernel: it finds
// the op's device (device_check.h), checks arguments, infers and allocates
// outputs (npu_empty.h), then calls launch() with the outputs and a small
// callable. Stage 2 is that callable, run later by the worker of the
// device's current stream: it builds CPU views of the device buffers
// (TensorRef::view) and runs ATen's CPU kernel into them.
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
// as on CUDA.
#pragma once

#include <ATen/core/Tensor.h>

#include <type_traits>
#include <utility>

#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"
#include "csrc/ops/device_check.h"
#include "csrc/ops/kernel_outputs.h"
#include "csrc/ops/npu_empty.h"
#include "csrc/ops/tensor_ref.h"

namespace torch_npu {

void check_not_forked();

// How stage 2 runs: queued on the worker (errors are recorded, outputs
// poisoned), or on the caller (errors propagate as ATen raised them).
enum class StageTwoMode { kQueued, kOnCaller };

// Runs on the stream worker (or the caller) around every kernel: no
// autograd, the intra-op thread count for the op's size, and errors
// handled per `mode`. `work` is the element count of the largest tensor the
// op touches; `outputs` may be null (nothing to poison).
void run_stage_two(const char* op, int64_t work, StageTwoMode mode, const KernelOutputs* outputs,
                   void (*body)(void*), void* callable);

// True the first time this thread launches `op` with `signature`
// (Note [Argument errors raise at the call]); marks it seen once it passed.
bool needs_validation(const char* op, uint64_t signature);
void mark_validated(const char* op, uint64_t signature);

template <typename Fn>
void invoke_callable(void* callable) {
  (*static_cast<Fn*>(callable))();
}

// Enqueues `fn` on the current stream of `device`; `outputs` are what it
// writes (poisoned if it fails on the stream).
template <typename F>
void launch(c10::DeviceIndex device, const char* op, KernelOutputs outputs, F&& fn) {
  using Fn = std::decay_t<F>;
  check_not_forked();
  const LaunchSnapshot snapshot = take_launch_snapshot();
  vnpu::Stream& stream = current_runtime_stream(device);
  try {
    if (needs_validation(op, snapshot.signature)) {
      Fn local(std::forward<F>(fn));
      stream.run_on_caller(op, [&] {
        run_stage_two(op, snapshot.work, StageTwoMode::kOnCaller, nullptr, &invoke_callable<Fn>, &local);
      });
      mark_validated(op, snapshot.signature);
      return;
    }
    stream.enqueue(op, [op, work = snapshot.work, outputs = std::move(outputs),
                        fn = Fn(std::forward<F>(fn))]() mutable {
      run_stage_two(op, work, StageTwoMode::kQueued, &outputs, &invoke_callable<Fn>, &fn);
    });
  } catch (const vnpu::Error& e) {
    throw_runtime_error(e);
  }
}

}  // namespace torch_npu
