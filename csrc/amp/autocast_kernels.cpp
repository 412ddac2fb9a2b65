// Autocast (torch.autocast(device_type="npu")) op lists for the
// AutocastPrivateUse1 key: the same policy as CUDA's -- matmuls and
// convolutions in the lower-precision dtype, reductions, losses and norms in
// float32, mixed inputs promoted to the widest type -- built from ATen's
// shared op lists so the two stay in step.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

// binary_cross_entropy is unsafe to autocast (as on CUDA): point users to
// binary_cross_entropy_with_logits.
at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                       int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

}  // namespace

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  using namespace at;  // ATen's op-list macros name types unqualified
#define NPU_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(NPU_LOWER_PRECISION_FP)
  AT_FORALL_FP32(NPU_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NPU_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(NPU_PROMOTE)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
#undef NPU_LOWER_PRECISION_FP
#undef NPU_FP32
#undef NPU_FP32_SET_OPT_DTYPE
#undef NPU_PROMOTE
}

}  // namespace torch_npu
