// Pooling ops whose npu behaviour differs from ATen's CPU kernels.
//
// max_pool3d_with_indices_backward with the indices of an Ascend chip.
// An Ascend chip's max-pool indices are int32, and torch_npu's backward
// kernels take any integer indices (real torch_npu's stable-ABI extension
// tests pass int32 and int8 ones). ATen's CPU kernels read int64 only. The
// structured pooling backward ops widen them in their generated kernels
// (INT64_INDICES in codegen/gen_structured_kernels.py); this one has no
// structured kernel, so it widens them here and then takes the synchronous
// native path, as it did before.
//
// max_unpool2d/3d with repeated indices: ATen's CPU kernel scatters the
// input in parallel chunks, so where two inputs name one output element the
// winner can change from call to call. The npu kernel is deterministic (the
// last input in order wins, as a serial loop gives), and real torch_npu's
// tests compare two calls with repeated indices: the CPU kernel runs with
// one intra-op thread on the calling thread. ATen's OpenMP backend sizes a
// parallel_for by the caller's omp_get_max_threads(), a per-thread setting,
// so the stream workers and other threads keep theirs.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "csrc/launch/intra_op_thread_count.h"
#include "csrc/launch/structured.h"
#include "csrc/launch/sync_kernel.h"

namespace torch_npu {
namespace {

void widen_indices_then_run(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  const size_t first = stack->size() - arguments.size();
  for (size_t i = 0; i < arguments.size(); ++i) {
    c10::IValue& arg = (*stack)[first + i];
    if (arguments[i].name() == "indices" && arg.isTensor()) arg = indices_as_int64(arg.toTensor());
  }
  sync_native_kernel(op, keys, stack);
}

void run_serially(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  (void)at::get_num_threads();  // ATen's lazy per-thread setup first, so it cannot undo ours
  ScopedIntraOpThreads serial(1);
  sync_native_kernel(op, keys, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_pool3d_with_indices_backward", torch::CppFunction::makeFromBoxedFunction<&widen_indices_then_run>());
  m.impl("max_pool3d_with_indices_backward.grad_input",
         torch::CppFunction::makeFromBoxedFunction<&widen_indices_then_run>());
  for (const char* name : {"max_unpool2d", "max_unpool2d.out", "max_unpool3d", "max_unpool3d.out"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&run_serially>());
  }
}

}  // namespace torch_npu
