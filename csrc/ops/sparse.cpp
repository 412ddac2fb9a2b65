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
// (announced once per op, as for dense ops without an npu kernel). add.out,
// which gradient accumulation and sparse SGD run, has its own kernel, and
// max() (torch_npu's, which ATen lacks for sparse tensors) and _coalesce
// (dense npu ops, no CPU fallback) have their own.
#include <ATen/ATen.h>
#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/native/SparseTensorUtils.h>
#include <torch/library.h>

#include "csrc/launch/cpu_fallback.h"
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

// add.out on sparse npu tensors, on the stream and as CUDA does it: sparse +
// sparse concatenates the operands' indices and values (an uncoalesced
// result, whatever the operands' layout in memory), dense + sparse
// accumulates the values into the dense result with index_put_. ATen's
// SparseCPU kernel would instead merge coalesced operands and run on the
// host. Unusual calls (mixed dtypes, broadcasting, errors) keep the CPU
// fallback, so they raise ATen's own messages.
void add_out_sparse(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 4);
  const at::Tensor self = args[0].toTensor();
  const at::Tensor other = args[1].toTensor();
  const c10::Scalar alpha = args[2].toScalar();
  at::Tensor out = args[3].toTensor();
  // Bool adds are logical ors, which neither concatenation nor index_put_ gives.
  const bool same_dtype = self.scalar_type() == other.scalar_type() && out.scalar_type() == self.scalar_type() &&
                          self.scalar_type() != at::kBool &&
                          // alpha ATen refuses for the dtype: its message comes from the fallback
                          !(c10::isIntegralType(self.scalar_type(), true) && !alpha.isIntegral(false)) &&
                          !(alpha.isComplex() && !c10::isComplexType(self.scalar_type()));
  const bool same_shape = self.sizes().equals(other.sizes());
  if (same_dtype && same_shape && self.is_sparse() && other.is_sparse() && out.is_sparse() &&
      self.sparse_dim() == other.sparse_dim() && self.dense_dim() == other.dense_dim()) {
    const at::Tensor scaled = alpha.equal(1) ? other._values() : other._values().mul(alpha);
    at::Tensor values = at::cat({self._values(), scaled}, 0);
    at::Tensor indices = at::cat({self._indices(), other._indices()}, 1);
    if (!out.is_same(self)) out.sparse_resize_(self.sizes(), self.sparse_dim(), self.dense_dim());
    at::sparse::get_sparse_impl(out)->set_indices_and_values_unsafe(indices, values);
    out._coalesced_(false);
  } else if (same_dtype && same_shape && !self.is_sparse() && other.is_sparse() && !out.is_sparse() &&
             other.sparse_dim() > 0 && out.sizes().equals(self.sizes())) {
    if (!out.is_same(self)) out.copy_(self);
    if (other._nnz() > 0) {
      const at::Tensor indices = other._indices();
      c10::List<std::optional<at::Tensor>> index;
      for (int64_t d = 0; d < other.sparse_dim(); ++d) index.push_back(indices.select(0, d));
      out.index_put_(index, alpha.equal(1) ? other._values() : other._values().mul(alpha), /*accumulate=*/true);
    }
  } else {
    coo_cpu_fallback(op, stack);
    return;
  }
  torch::jit::drop(*stack, 4);
  stack->emplace_back(out);
}

// _coalesce on npu, from dense npu ops (so it queues, with no CPU fallback):
// the indices flattened to one linear index, sorted and made unique, and
// the values of each index added up with index_add_. Half and bfloat16
// values add up in float32 and round once, as the chip's kernel does (the
// CPU kernel adds them in their own precision).
at::Tensor coalesce_sparse(const at::Tensor& self) {
  const int64_t sparse_dim = self.sparse_dim();
  const at::Tensor indices = self._indices();
  const at::Tensor values = self._values();
  const auto options = self.options();
  if (self._nnz() < 2) {
    return at::_sparse_coo_tensor_unsafe(indices.clone(), values.clone(), self.sizes(), options)._coalesced_(true);
  }
  const bool reduced = values.scalar_type() == at::kHalf || values.scalar_type() == at::kBFloat16;
  const at::Tensor summands = reduced ? values.to(at::kFloat) : values;
  // Row-major over the sparse dimensions (none: every entry is the one element there is).
  at::Tensor linear = sparse_dim == 0 ? at::zeros({self._nnz()}, indices.options()) : indices.select(0, 0);
  for (int64_t d = 1; d < sparse_dim; ++d) linear = linear.mul(self.size(d)).add_(indices.select(0, d));
  auto [unique, inverse, counts] = at::_unique2(linear, /*sorted=*/true, /*return_inverse=*/true,
                                                /*return_counts=*/false);
  std::vector<int64_t> value_sizes = summands.sizes().vec();
  value_sizes[0] = unique.size(0);
  at::Tensor sums = at::zeros(value_sizes, summands.options()).index_add_(0, inverse, summands);
  if (reduced) sums = sums.to(values.scalar_type());
  // The linear index back to one row per sparse dimension, last dimension first.
  at::Tensor rest = unique;
  std::vector<at::Tensor> rows(sparse_dim);
  for (int64_t d = sparse_dim - 1; d >= 0; --d) {
    rows[d] = rest.remainder(self.size(d));
    rest = rest.div(self.size(d), "floor");
  }
  const at::Tensor new_indices = sparse_dim == 0 ? indices.new_empty({0, unique.size(0)}) : at::stack(rows);
  return at::_sparse_coo_tensor_unsafe(new_indices, sums, self.sizes(), options)._coalesced_(true);
}

// max() of a COO tensor, as torch_npu has it (ATen has no sparse max): the
// largest element of the tensor it stands for, implicit zeros included.
// Duplicate indices add up first (coalesce); an element no index names is 0.
at::Tensor max_sparse(const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0, "max(): Expected reduction dim to be specified for input.numel() == 0. "
              "Specify the reduction dim with the 'dim' argument.");
  const at::Tensor coalesced = self.coalesce();
  const at::Tensor values = coalesced._values();
  const at::Tensor zero = at::zeros({}, values.options());
  if (values.numel() == 0) return zero;
  at::Tensor largest = values.max();
  const bool implicit_zeros = values.numel() < self.numel();  // some element is not stored
  return implicit_zeros ? at::maximum(largest, zero) : largest;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("add.out", torch::CppFunction::makeFromBoxedFunction<&add_out_sparse>());
  m.impl("max", TORCH_FN(max_sparse));
  m.impl("_coalesce", TORCH_FN(coalesce_sparse));
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
