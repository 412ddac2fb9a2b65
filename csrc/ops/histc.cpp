// aten::histc of integer tensors on npu.
//
// ATen's CPU histogram takes floating inputs only ("histogram_cpu" not
// implemented for 'Int'), while CUDA's, and torch_npu's, count integer
// tensors too and return the counts in the input's dtype. vNPU's histc runs
// ATen's CPU kernel (csrc/launch/op_policy.cpp), so an integer input is
// counted as float32 values (exact for integers below 2^24) and the counts
// are returned in its dtype. This sits at the autograd key, which histc
// (not differentiable) only passes through.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

bool integral(const at::Tensor& self) { return at::isIntegralType(self.scalar_type(), /*includeBool=*/false); }

at::Tensor histc_npu(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  if (!integral(self)) return at::histc(self, bins, min, max);
  return at::histc(self.to(at::kFloat), bins, min, max).to(self.scalar_type());
}

at::Tensor& histc_out_npu(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                          at::Tensor& out) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  if (!integral(self)) return at::histc_out(out, self, bins, min, max);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "torch.histogram: input tensor and hist tensor should have ",
              "the same dtype, but got input ", self.scalar_type(), " and hist ", out.scalar_type());
  out.copy_(at::histc(self.to(at::kFloat), bins, min, max));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("histc", TORCH_FN(histc_npu));
  m.impl("histc.out", TORCH_FN(histc_out_npu));
}

}  // namespace torch_npu
