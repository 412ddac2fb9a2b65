// Activation and dropout kernels that ATen implements without a structured
// meta function: their outputs have the input's shape, so stage 1 simply
// allocates empty_like and stage 2 runs the CPU kernel.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/clamp_min_cpu_dispatch.h>
#include <ATen/ops/mul_cpu_dispatch.h>
#include <ATen/ops/relu_cpu_dispatch.h>
#include <torch/library.h>

#include "csrc/core/npu_generator.h"
#include "csrc/launch/launch.h"

namespace torch_npu {
namespace {

// The layout CPU's TensorIterator gives an element-wise result of `t`: dense,
// with t's dimension order (t's own strides when t is dense), as
// empty_like(preserve_format) does. Dropout's result keeps a permuted input's
// order, as real torch_npu's and CPU's do (real test_dropout's stride checks).
at::Tensor empty_like_npu(const at::Tensor& t, c10::DeviceIndex device, std::optional<at::ScalarType> dtype = {}) {
  const auto strides = at::infer_dense_strides(t.sizes(), t.strides());
  return empty_npu(t.sizes(), strides, t.options().dtype(dtype.value_or(t.scalar_type())), device);
}

at::Tensor npu_relu(const at::Tensor& self) {
  const auto device = common_device("relu", self);
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  at::Tensor out = empty_like_npu(self, device);
  // CPU's relu is clamp_min(self, 0); clamp_min_out writes straight into `out`.
  LaunchSnapshot snap;
  launch(device, "relu", {out}, snap, [self_ = snap.ref(self), out_ = snap.ref(out)]() {
    at::Tensor out = out_.view();
    at::cpu::clamp_min_out(out, self_.view(), 0);
  });
  return out;
}

at::Tensor& npu_relu_(at::Tensor& self) {
  const auto device = common_device("relu_", self);
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  LaunchSnapshot snap;
  launch(device, "relu_", {self}, snap, [self_ = snap.ref(self)]() {
    at::Tensor self = self_.view();
    at::cpu::clamp_min_(self, 0);
  });
  return self;
}

// Same algorithm as ATen's CPU native_dropout, with the mask drawn from the
// npu generator so torch.npu.manual_seed fixes it.
std::tuple<at::Tensor, at::Tensor> npu_native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  const auto device = common_device("native_dropout", input);
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  at::Tensor output = empty_like_npu(input, device);
  at::Tensor mask = empty_like_npu(input, device, at::kBool);
  const bool training = !train.has_value() || *train;
  const OpSeed seed = training && p > 0 && p < 1 ? draw_op_seed(std::nullopt, device) : OpSeed{};
  LaunchSnapshot snap;
  launch(device, "native_dropout", {output, mask}, snap, [in_ = snap.ref(input), out_ = snap.ref(output), mask_ = snap.ref(mask), p,
                                    training, seed]() {
    at::Tensor out = out_.view(), mask = mask_.view();
    const at::Tensor in = in_.view();
    if (!training || p == 0) {
      out.copy_(in);
      mask.fill_(true);
    } else if (p == 1) {
      out.zero_();
      mask.fill_(false);
    } else {
      mask.bernoulli_(1 - p, cpu_generator_for(seed));
      at::cpu::mul_out(out, in, mask);
      out.mul_(1.0 / (1 - p));
    }
  });
  return {output, mask};
}

at::Tensor npu_native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  const auto device = common_device("native_dropout_backward", grad, mask);
  // grad * mask * scale: integral gradients promote to the default float type.
  const auto dtype = c10::isIntegralType(grad.scalar_type(), /*includeBool=*/true)
                         ? c10::typeMetaToScalarType(c10::get_default_dtype())
                         : grad.scalar_type();
  at::Tensor out = empty_like_npu(grad, device, dtype);
  LaunchSnapshot snap;
  launch(device, "native_dropout_backward", {out}, snap, [grad_ = snap.ref(grad), mask_ = snap.ref(mask), scale,
                                             out_ = snap.ref(out)]() {
    // grad * mask * scale, as ATen's kernel computes it, written into `out`
    // (no host temporary outside the device allocator).
    at::Tensor out = out_.view();
    at::cpu::mul_out(out, grad_.view(), mask_.view());
    out.mul_(scale);
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("relu", TORCH_FN(npu_relu));
  m.impl("relu_", TORCH_FN(npu_relu_));
  m.impl("native_dropout", TORCH_FN(npu_native_dropout));
  m.impl("native_dropout_backward", TORCH_FN(npu_native_dropout_backward));
}

}  // namespace torch_npu
