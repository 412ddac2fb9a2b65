// Sparse tensors on npu: the SparsePrivateUse1 (COO) and SparseCsrPrivateUse1
// (CSR/CSC/BSR/BSC) dispatch keys.
//
// A sparse npu tensor is ATen's own SparseTensorImpl / SparseCsrTensorImpl
// whose indices and values are dense npu tensors. ATen writes most sparse
// kernels once, over dense operators on those members, and registers that
// kernel for both SparseCPU and SparseCUDA (gen_sparse_ops.py lists them).
// For those we call the SparseCPU kernel with the npu tensors: nothing in it
// is CPU-specific, and every dense op it calls dispatches back to npu, so the
// work is queued on the stream like any other. The rest (coalescing, sparse
// GEMMs, softmax: ATen's CPU loops) take the CPU fallback, which moves the
// arguments to the host, runs the SparseCPU kernel and moves the results back
// (announced once per op, as for dense ops without an npu kernel).
#include <ATen/ATen.h>
#include <ATen/SparseCsrTensorImpl.h>
#include <torch/library.h>

#include "csrc/ops/cpu_fallback.h"
#include "sparse_ops.h"

namespace torch_npu {
namespace {

void run_generic_coo_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::SparseCPU), stack);
}

void run_generic_compressed_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::SparseCsrCPU), stack);
}

// The CPU fallback writes a mutated sparse argument back with this: copy_ of
// sparse tensors resizes the destination and copies indices and values.
at::Tensor copy_from_and_resize_sparse(const at::Tensor& self, const at::Tensor& dst) {
  TORCH_CHECK(self.layout() == dst.layout(), "_copy_from_and_resize: cannot copy a ", self.layout(),
              " tensor into a ", dst.layout(), " tensor");
  if (dst.layout() == c10::kSparse) {
    return dst.copy_(self);
  }
  // Compressed layouts have no resizing copy: take the source's members.
  auto& impl = *static_cast<at::SparseCsrTensorImpl*>(dst.unsafeGetTensorImpl());
  const auto device = dst.device();
  at::Tensor compressed, plain;
  if (self.layout() == c10::kSparseCsr || self.layout() == c10::kSparseBsr) {
    compressed = self.crow_indices();
    plain = self.col_indices();
  } else {
    compressed = self.ccol_indices();
    plain = self.row_indices();
  }
  impl.set_member_tensors(compressed.to(device), plain.to(device), self.values().to(device), self.sizes());
  return dst;
}

void coo_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  npu_cpu_fallback(op, stack, c10::DispatchKey::SparseCPU);
}

void compressed_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  npu_cpu_fallback(op, stack, c10::DispatchKey::SparseCsrCPU);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  for (const char* name : kGenericSparseCooOps) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&run_generic_coo_kernel>());
  }
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize_sparse));
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  for (const char* name : kGenericSparseCompressedOps) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&run_generic_compressed_kernel>());
  }
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize_sparse));
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&coo_cpu_fallback>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&compressed_cpu_fallback>());
}

}  // namespace torch_npu
