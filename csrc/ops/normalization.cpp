// Layer normalisation (forward and backward), asynchronous. ATen's CPU
// kernels are not structured, so the output shapes are worked out here the
// way ATen does: y like the input, mean/rstd with the normalised dimensions
// kept as size 1, in the input's dtype (float when a reduced-precision input
// meets float parameters, as ATen's mixed-type rule).
// launch.h first: the *_cpu_dispatch.h headers assume ATen's core types.
#include "csrc/ops/launch.h"

#include <ATen/ops/native_layer_norm_backward_cpu_dispatch.h>
#include <ATen/ops/native_layer_norm_cpu_dispatch.h>
#include <torch/library.h>

#include <sstream>

namespace torch_npu {
namespace {

std::vector<int64_t> to_vector(c10::SymIntArrayRef values) {
  const auto ints = C10_AS_INTARRAYREF_SLOW(values);
  return std::vector<int64_t>(ints.begin(), ints.end());
}

// ATen's _check_layer_norm_inputs, with its messages.
int64_t check_layer_norm(const at::Tensor& input, const std::vector<int64_t>& normalized_shape,
                         const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias) {
  const int64_t normalized_ndim = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(normalized_ndim >= 1, "Expected normalized_shape to be at least 1-dimensional, i.e., ",
              "containing at least one element, but got normalized_shape = ", c10::IntArrayRef(normalized_shape));
  for (const auto* t : {&weight, &bias}) {
    TORCH_CHECK(!t->has_value() || !(*t)->defined() || (*t)->sizes() == c10::IntArrayRef(normalized_shape),
                "Expected ", (t == &weight ? "weight" : "bias"), " to be of same shape as normalized_shape, but got ",
                (t == &weight ? "weight" : "bias"), " of shape ", (*t)->sizes(), " and normalized_shape = ",
                c10::IntArrayRef(normalized_shape));
  }
  const int64_t input_ndim = input.dim();
  const auto input_shape = input.sizes();
  bool ok = input_ndim >= normalized_ndim;
  for (int64_t i = 0; ok && i < normalized_ndim; ++i) {
    ok = input_shape[input_ndim - normalized_ndim + i] == normalized_shape[i];
  }
  if (!ok) {
    std::ostringstream ss;
    ss << "Given normalized_shape=" << c10::IntArrayRef(normalized_shape) << ", expected input with shape [*";
    for (auto size : normalized_shape) ss << ", " << size;
    ss << "], but got input of size" << input_shape;
    TORCH_CHECK(false, ss.str());
  }
  return input_ndim - normalized_ndim;
}

at::ScalarType stats_dtype(const at::Tensor& input, const std::optional<at::Tensor>& weight) {
  const bool reduced = input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16;
  const bool float_params = weight.has_value() && weight->defined() && weight->scalar_type() == at::kFloat;
  return reduced && float_params ? at::kFloat : input.scalar_type();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_native_layer_norm(
    const at::Tensor& input, c10::SymIntArrayRef normalized_shape_sym, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, double eps) {
  const auto device = common_device("native_layer_norm", input, weight, bias);
  const auto normalized_shape = to_vector(normalized_shape_sym);
  const int64_t axis = check_layer_norm(input, normalized_shape, weight, bias);
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  stat_shape.resize(input.dim(), 1);
  at::Tensor out = empty_npu(input.sizes(), {}, input.options(), device);
  at::Tensor mean = empty_npu(stat_shape, {}, input.options().dtype(stats_dtype(input, weight)), device);
  at::Tensor rstd = empty_npu(stat_shape, {}, mean.options(), device);
  launch(device, "native_layer_norm", [in_ = TensorRef(input), normalized_shape, w_ = TensorRef(weight),
                                       b_ = TensorRef(bias), eps, out_ = TensorRef(out), mean_ = TensorRef(mean),
                                       rstd_ = TensorRef(rstd)]() {
    auto [y, m, r] = at::cpu::native_layer_norm(in_.view(), normalized_shape, w_.optional_view(),
                                                b_.optional_view(), eps);
    out_.view().copy_(y);
    mean_.view().copy_(m.view(mean_.view().sizes()));
    rstd_.view().copy_(r.view(rstd_.view().sizes()));
  });
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape_sym,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask) {
  const auto device = common_device("native_layer_norm_backward", grad_out, input, mean, rstd, weight, bias);
  const auto normalized_shape = to_vector(normalized_shape_sym);
  check_layer_norm(input, normalized_shape, weight, bias);
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) grad_input = empty_npu(input.sizes(), {}, input.options(), device);
  if (output_mask[1] && weight.has_value() && weight->defined()) {
    grad_weight = empty_npu(weight->sizes(), {}, weight->options(), device);
  }
  if (output_mask[2] && bias.has_value() && bias->defined()) {
    grad_bias = empty_npu(bias->sizes(), {}, bias->options(), device);
  }
  launch(device, "native_layer_norm_backward",
         [go_ = TensorRef(grad_out), in_ = TensorRef(input), normalized_shape, mean_ = TensorRef(mean),
          rstd_ = TensorRef(rstd), w_ = TensorRef(weight), b_ = TensorRef(bias), output_mask,
          gi_ = TensorRef(grad_input), gw_ = TensorRef(grad_weight), gb_ = TensorRef(grad_bias)]() {
           auto [gi, gw, gb] = at::cpu::native_layer_norm_backward(go_.view(), in_.view(), normalized_shape,
                                                                    mean_.view(), rstd_.view(), w_.optional_view(),
                                                                    b_.optional_view(), output_mask);
           if (gi_.defined()) gi_.view().copy_(gi);
           if (gw_.defined()) gw_.view().copy_(gw);
           if (gb_.defined()) gb_.view().copy_(gb);
         });
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", TORCH_FN(npu_native_layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(npu_native_layer_norm_backward));
}

}  // namespace torch_npu
