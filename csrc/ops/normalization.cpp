// Layer and batch normalisation (forward and backward), asynchronous. ATen's CPU
// kernels are not structured, so the output shapes are worked out here the
// way ATen does: y like the input, mean/rstd with the normalised dimensions
// kept as size 1, in the input's dtype (float when a reduced-precision input
// meets float parameters, as ATen's mixed-type rule).
// launch.h first: the *_cpu_dispatch.h headers assume ATen's core types.
#include "csrc/launch/launch.h"

#include <ATen/ops/native_batch_norm_backward_cpu_dispatch.h>
#include <ATen/ops/native_batch_norm_cpu_dispatch.h>
#include <ATen/ops/native_layer_norm_backward_cpu_dispatch.h>
#include <ATen/ops/native_layer_norm_cpu_dispatch.h>
#include <torch/library.h>

#include <sstream>

#include "csrc/launch/cpu_allocation_scope.h"

namespace torch_npu {
namespace {

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
  const auto normalized_shape = C10_AS_INTARRAYREF_SLOW(normalized_shape_sym).vec();
  const int64_t axis = check_layer_norm(input, normalized_shape, weight, bias);
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  stat_shape.resize(input.dim(), 1);
  at::Tensor out = empty_npu(input.sizes(), {}, input.options(), device);
  at::Tensor mean = empty_npu(stat_shape, {}, input.options().dtype(stats_dtype(input, weight)), device);
  at::Tensor rstd = empty_npu(stat_shape, {}, mean.options(), device);
  LaunchSnapshot snap;
  launch(device, "native_layer_norm", {out, mean, rstd}, snap,
         [device, in_ = snap.ref(input), normalized_shape, w_ = snap.ref(weight), b_ = snap.ref(bias), eps,
          out_ = snap.ref(out), mean_ = snap.ref(mean), rstd_ = snap.ref(rstd)]() {
           // ATen's CPU kernel is reachable only through its functional form
           // (its in-place stub is not exported): the results are scratch in
           // device memory, then copied.
           DeviceMemoryScope scratch(device);
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
  const auto normalized_shape = C10_AS_INTARRAYREF_SLOW(normalized_shape_sym).vec();
  check_layer_norm(input, normalized_shape, weight, bias);
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) grad_input = empty_npu(input.sizes(), {}, input.options(), device);
  if (output_mask[1] && weight.has_value() && weight->defined()) {
    grad_weight = empty_npu(weight->sizes(), {}, weight->options(), device);
  }
  if (output_mask[2] && bias.has_value() && bias->defined()) {
    grad_bias = empty_npu(bias->sizes(), {}, bias->options(), device);
  }
  LaunchSnapshot snap;
  launch</*kMayBox=*/true>(device, "native_layer_norm_backward", {grad_input, grad_weight, grad_bias}, snap,
         [device, go_ = snap.ref(grad_out), in_ = snap.ref(input), normalized_shape, mean_ = snap.ref(mean),
          rstd_ = snap.ref(rstd), w_ = snap.ref(weight), b_ = snap.ref(bias), output_mask,
          gi_ = snap.ref(grad_input), gw_ = snap.ref(grad_weight), gb_ = snap.ref(grad_bias)]() {
           DeviceMemoryScope scratch(device);  // as in the forward
           auto [gi, gw, gb] = at::cpu::native_layer_norm_backward(go_.view(), in_.view(), normalized_shape,
                                                                    mean_.view(), rstd_.view(), w_.optional_view(),
                                                                    b_.optional_view(), output_mask);
           if (gi_.defined()) gi_.view().copy_(gi);
           if (gw_.defined()) gw_.view().copy_(gw);
           if (gb_.defined()) gb_.view().copy_(gb);
         });
  return {grad_input, grad_weight, grad_bias};
}

// --- batch norm ------------------------------------------------------------

bool defined(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// ATen's rule for the dtype of batch-norm statistics and parameter
// gradients: float when a reduced-precision input meets float parameters.
at::ScalarType batch_norm_param_dtype(const at::Tensor& input, std::initializer_list<const std::optional<at::Tensor>*> params) {
  const bool reduced = input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16;
  for (const auto* p : params) {
    if (reduced && defined(*p) && (*p)->scalar_type() == at::kFloat) return at::kFloat;
  }
  return input.scalar_type();
}

void check_batch_norm_params(const at::Tensor& input, std::initializer_list<std::pair<const char*, const std::optional<at::Tensor>*>> params) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected input with at least 2 dimensions, but got ", input.dim());
  const int64_t channels = input.size(1);
  for (const auto& [name, p] : params) {
    if (defined(*p)) {
      TORCH_CHECK((*p)->numel() == channels, name, " should contain ", channels, " elements not ", (*p)->numel());
    }
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, bool training,
    double momentum, double eps) {
  const auto device = common_device("native_batch_norm", input, weight, bias, running_mean, running_var);
  check_batch_norm_params(input, {{"weight", &weight}, {"bias", &bias}, {"running_mean", &running_mean},
                                  {"running_var", &running_var}});
  TORCH_CHECK(training || (defined(running_mean) && defined(running_var)),
              "running_mean and running_var must be defined in evaluation mode");
  const auto stats_dtype = batch_norm_param_dtype(input, {&weight, &bias, &running_mean, &running_var});
  at::Tensor out = empty_npu(input.sizes(), {}, input.options().memory_format(input.suggest_memory_format()), device);
  const int64_t stats = training ? input.size(1) : 0;
  at::Tensor save_mean = empty_npu({stats}, {}, input.options().dtype(stats_dtype), device);
  at::Tensor save_invstd = empty_npu({stats}, {}, input.options().dtype(stats_dtype), device);
  LaunchSnapshot snap;
  launch(device, "native_batch_norm", {out, save_mean, save_invstd}, snap,
         [in_ = snap.ref(input), w_ = snap.ref(weight), b_ = snap.ref(bias), rm_ = snap.ref(running_mean),
          rv_ = snap.ref(running_var), training, momentum, eps, out_ = snap.ref(out),
          mean_ = snap.ref(save_mean), invstd_ = snap.ref(save_invstd), device]() {
           at::Tensor out = out_.view(), mean = mean_.view(), invstd = invstd_.view();
           at::Tensor in = in_.view();
           // ATen's CPU native_batch_norm.out computes wrong statistics in
           // training for an input dense in neither the contiguous nor the
           // channels-last order (a transposed or strided view; its functional
           // form and eval mode are right): give it a dense copy, in scratch.
           DeviceMemoryScope scratch(device);
           if (training && !in.is_contiguous() && !in.is_contiguous(at::MemoryFormat::ChannelsLast) &&
               !in.is_contiguous(at::MemoryFormat::ChannelsLast3d)) {
             in = in.contiguous();
           }
           // running_mean/var are updated in place through their views.
           at::cpu::native_batch_norm_out(out, mean, invstd, in, w_.optional_view(), b_.optional_view(),
                                          rm_.optional_view(), rv_.optional_view(), training, momentum, eps);
         });
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> output_mask) {
  const auto device = common_device("native_batch_norm_backward", grad_out, input, weight, running_mean,
                                    running_var, save_mean, save_invstd);
  check_batch_norm_params(input, {{"weight", &weight}, {"running_mean", &running_mean}, {"running_var", &running_var}});
  const auto param_dtype = defined(weight) ? weight->scalar_type()
                                           : batch_norm_param_dtype(input, {&running_mean, &running_var});
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    grad_input = empty_npu(input.sizes(), {}, input.options().memory_format(input.suggest_memory_format()), device);
  }
  if (output_mask[1]) grad_weight = empty_npu({input.size(1)}, {}, input.options().dtype(param_dtype), device);
  if (output_mask[2]) grad_bias = empty_npu({input.size(1)}, {}, input.options().dtype(param_dtype), device);
  LaunchSnapshot snap;
  launch</*kMayBox=*/true>(device, "native_batch_norm_backward", {grad_input, grad_weight, grad_bias}, snap,
         [go_ = snap.ref(grad_out), in_ = snap.ref(input), w_ = snap.ref(weight), rm_ = snap.ref(running_mean),
          rv_ = snap.ref(running_var), sm_ = snap.ref(save_mean), si_ = snap.ref(save_invstd), train, eps,
          output_mask, device, gi_ = snap.ref(grad_input), gw_ = snap.ref(grad_weight), gb_ = snap.ref(grad_bias)]() {
           // ATen's CPU backward has no out= form: its results are scratch.
           DeviceMemoryScope scratch(device);
           auto [gi, gw, gb] = at::cpu::native_batch_norm_backward(
               go_.view(), in_.view(), w_.optional_view(), rm_.optional_view(), rv_.optional_view(),
               sm_.optional_view(), si_.optional_view(), train, eps, output_mask);
           if (gi_.defined()) gi_.view().copy_(gi);
           if (gw_.defined()) gw_.view().copy_(gw);
           if (gb_.defined()) gb_.view().copy_(gb);
         });
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", TORCH_FN(npu_native_batch_norm));
  m.impl("native_batch_norm_backward", TORCH_FN(npu_native_batch_norm_backward));
  m.impl("native_layer_norm", TORCH_FN(npu_native_layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(npu_native_layer_norm_backward));
}

}  // namespace torch_npu
