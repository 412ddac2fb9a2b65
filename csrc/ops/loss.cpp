// Losses whose half-precision results follow the chip's numerics.
//
// binary_cross_entropy_with_logits is an ATen composite: on float16 and
// bfloat16 inputs each of its steps (log-sigmoid, the weighting, the
// reduction) rounds to the input dtype, so the loss drifts from the float32
// result by a few units in the last place. The chip's kernel (aclnnBinary
// CrossEntropyWithLogits) computes in float32 and rounds once; so does this
// one, and real torch_npu's own tests compare with float32 cpu that way.
// Float32 and float64 take ATen's composite unchanged.
#include <ATen/ops/binary_cross_entropy_with_logits.h>
#include <ATen/ops/binary_cross_entropy_with_logits_native.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

bool is_reduced_float(const at::Tensor& t) {
  return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
}

std::optional<at::Tensor> to_float(const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return t;
  return t->to(at::kFloat);
}

at::Tensor npu_binary_cross_entropy_with_logits(const at::Tensor& self, const at::Tensor& target,
                                                const std::optional<at::Tensor>& weight,
                                                const std::optional<at::Tensor>& pos_weight, int64_t reduction) {
  if (!is_reduced_float(self)) {
    return at::native::binary_cross_entropy_with_logits(self, target, weight, pos_weight, reduction);
  }
  // The float32 ops are npu ops: they queue on the stream like the composite's.
  const at::Tensor loss = at::binary_cross_entropy_with_logits(self.to(at::kFloat), target.to(at::kFloat),
                                                               to_float(weight), to_float(pos_weight), reduction);
  return loss.to(self.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("binary_cross_entropy_with_logits", TORCH_FN(npu_binary_cross_entropy_with_logits));
}

}  // namespace torch_npu
