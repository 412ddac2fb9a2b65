// Gathering rows: index_select and the embedding backward. Hot in NLP
// models (nn.Embedding forward is index_select), and not structured in ATen.
// Out-of-range indices are found by the CPU kernel in stage 2 and reported
// at the next synchronisation point, as on a real device.
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/embedding_dense_backward_cpu_dispatch.h>
#include <ATen/ops/index_add_cpu_dispatch.h>
#include <ATen/ops/index_select_cpu_dispatch.h>
#include <torch/library.h>

#include "csrc/launch/cpu_allocation_scope.h"
#include "csrc/launch/launch.h"

namespace torch_npu {
namespace {

std::vector<int64_t> index_select_shape(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  TORCH_CHECK(!(self.dim() == 0 && index.numel() != 1),
              "index_select(): Index to scalar can have only 1 value, got ", index.numel(), " value(s)");
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim() > 0) shape[dim] = index.numel();
  return shape;
}

at::Tensor npu_index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  const auto device = common_device("index_select", self, index);
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::Tensor out = empty_npu(index_select_shape(self, dim, index), {}, self.options(), device);
  LaunchSnapshot snap;
  launch(device, "index_select", {out}, snap, [self_ = snap.ref(self), index_ = snap.ref(index), dim, out_ = snap.ref(out)]() {
    at::Tensor out = out_.view();
    at::cpu::index_select_out(out, self_.view(), dim, index_.view());
  });
  return out;
}

at::Tensor& npu_index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  const auto device = common_device("index_select.out", self, index, out);
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "index_select(): self and result must have the same scalar type");
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, index);
  at::native::resize_output(out, index_select_shape(self, dim, index));
  LaunchSnapshot snap;
  launch(device, "index_select.out", {out}, snap, [self_ = snap.ref(self), index_ = snap.ref(index), dim, out_ = snap.ref(out)]() {
    at::Tensor out = out_.view();
    at::cpu::index_select_out(out, self_.view(), dim, index_.view());
  });
  return out;
}

at::Tensor npu_embedding_dense_backward(const at::Tensor& grad, const at::Tensor& indices, c10::SymInt num_weights,
                                        c10::SymInt padding_idx, bool scale_grad_by_freq) {
  const auto device = common_device("embedding_dense_backward", grad, indices);
  const int64_t rows = num_weights.expect_int(), padding = padding_idx.expect_int();
  at::Tensor out = empty_npu({rows, grad.size(-1)}, {}, grad.options(), device);
  LaunchSnapshot snap;
  launch(device, "embedding_dense_backward", {out}, snap, [device, grad_ = snap.ref(grad), indices_ = snap.ref(indices), rows, padding,
                                              scale_grad_by_freq, out_ = snap.ref(out)]() {
    at::Tensor out = out_.view();
    if (scale_grad_by_freq || !at::isFloatingType(out.scalar_type()) || out.element_size() < 4) {
      // ATen scales each term by its row's count, and accumulates half and
      // bfloat16 in float: keep its kernel, and its rounding.
      DeviceMemoryScope scratch(device);  // the kernel has no out= form
      out.copy_(at::cpu::embedding_dense_backward(grad_.view(), indices_.view(), rows, padding, scale_grad_by_freq));
      return;
    }
    // For float and double, ATen's CPU kernel adds grad[i] into row indices[i] in index order,
    // skipping padding_idx: index_add_ into the zeroed output does the same
    // sums in the same order, with no host temporary for the result.
    const at::Tensor indices = indices_.view().reshape(-1);
    const at::Tensor grad = grad_.view().reshape({indices.numel(), out.size(1)});
    out.zero_();
    at::cpu::index_add_out(out, out, 0, indices, grad, 1);
    if (padding >= 0 && padding < rows) out.select(0, padding).zero_();
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_select", TORCH_FN(npu_index_select));
  m.impl("index_select.out", TORCH_FN(npu_index_select_out));
  m.impl("embedding_dense_backward", TORCH_FN(npu_embedding_dense_backward));
}

}  // namespace torch_npu
