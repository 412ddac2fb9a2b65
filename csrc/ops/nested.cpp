// Nested tensors on npu: the NestedTensorPrivateUse1 dispatch key.
//
// A nested npu tensor is ATen's own NestedTensorImpl whose buffer is a dense
// npu tensor (its size, stride and offset metadata stay on the host, as for
// CUDA). As for sparse tensors (ops/sparse.cpp), ATen writes most nested
// kernels once, over dense operators on the buffer, and registers that kernel
// for both NestedTensorCPU and NestedTensorCUDA (gen_sparse_ops.py lists
// them): those run as the NestedTensorCPU kernel with the npu tensors, every
// dense op inside queued on the stream. The rest (bmm, sum, padding,
// the fused multi-head attention: ATen's CPU loops) take the CPU fallback.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "csrc/launch/cpu_fallback.h"
#include "sparse_ops.h"

namespace torch_npu {
namespace {

void run_generic_nested_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::NestedTensorCPU), stack);
}

void nested_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  npu_cpu_fallback(op, stack, c10::DispatchKey::NestedTensorCPU);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  for (const char* name : kGenericNestedOps) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&run_generic_nested_kernel>());
  }
}

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&nested_cpu_fallback>());
}

}  // namespace torch_npu
