// Convolution on npu. ATen routes convolutions on devices it does not know
// to convolution_overrideable / convolution_backward_overrideable; these
// compute output shapes in stage 1 and run ATen's CPU convolution (oneDNN
// or the native kernels) in stage 2.
#include <ATen/native/ConvUtils.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <torch/library.h>

#include "csrc/launch/cpu_allocation_scope.h"
#include "csrc/launch/launch.h"

namespace torch_npu {
namespace {

// Validates like ATen's check_shape_forward, with its messages, so bad
// shapes fail at the call rather than later on the stream.
std::vector<int64_t> output_shape(const at::Tensor& input, const at::Tensor& weight,
                                  const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                                  const std::vector<int64_t>& dilation, bool transposed,
                                  const std::vector<int64_t>& output_padding, int64_t groups) {
  const int64_t dim = weight.dim();
  TORCH_CHECK(input.dim() == dim, "Expected ", dim, "-dimensional input for ", dim, "-dimensional weight ",
              weight.sizes(), ", but got ", input.dim(), "-dimensional input of size ", input.sizes(),
              " instead");
  TORCH_CHECK(groups > 0, "non-positive groups is not supported");
  const size_t spatial = static_cast<size_t>(dim - 2);
  TORCH_CHECK(stride.size() == spatial && padding.size() == spatial && dilation.size() == spatial,
              "expected stride, padding and dilation to have ", spatial, " elements");
  for (auto s : stride) TORCH_CHECK(s > 0, "non-positive stride is not supported");
  for (auto p : padding) TORCH_CHECK(p >= 0, "negative padding is not supported");
  if (!transposed) {
    TORCH_CHECK(weight.size(0) % groups == 0, "Given groups=", groups, ", expected weight to be divisible by ",
                groups, " at dimension 0, but got weight of size ", weight.sizes(), " instead");
    TORCH_CHECK(input.size(1) == weight.size(1) * groups, "Given groups=", groups, ", weight of size ",
                weight.sizes(), ", expected input", input.sizes(), " to have ", weight.size(1) * groups,
                " channels, but got ", input.size(1), " channels instead");
    auto out = at::native::conv_output_size(input.sizes(), weight.sizes(), padding, stride, dilation);
    for (size_t i = 2; i < out.size(); ++i) {
      TORCH_CHECK(out[i] > 0, "Calculated output size: ", c10::IntArrayRef(out),
                  ". Output size is too small");
    }
    return out;
  }
  TORCH_CHECK(input.size(1) == weight.size(0), "Given transposed=1, weight of size ", weight.sizes(),
              ", expected input", input.sizes(), " to have ", weight.size(0), " channels, but got ",
              input.size(1), " channels instead");
  std::vector<int64_t> out{input.size(0), weight.size(1) * groups};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t kernel = weight.size(static_cast<int64_t>(i) + 2);
    out.push_back((input.size(static_cast<int64_t>(i) + 2) - 1) * stride[i] - 2 * padding[i] +
                  dilation[i] * (kernel - 1) + output_padding[i] + 1);
    TORCH_CHECK(out.back() > 0, "Calculated output size: ", c10::IntArrayRef(out), ". Output size is too small");
  }
  return out;
}

at::Tensor npu_convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                           bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  const auto device = common_device("convolution", input, weight, bias);
  auto s = C10_AS_INTARRAYREF_SLOW(stride).vec(), p = C10_AS_INTARRAYREF_SLOW(padding).vec(), d = C10_AS_INTARRAYREF_SLOW(dilation).vec(), op = C10_AS_INTARRAYREF_SLOW(output_padding).vec();
  const int64_t g = groups.expect_int();
  const auto shape = output_shape(input, weight, s, p, d, transposed, op, g);
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), "Input type (", input.scalar_type(),
              ") and weight type (", weight.scalar_type(), ") should be the same");
  const auto memory_format = input.suggest_memory_format();
  at::Tensor out = empty_npu(shape, {}, input.options().memory_format(memory_format), device);
  LaunchSnapshot snap;
  launch(device, "convolution", {out}, snap,
         [device, in_ = snap.ref(input), w_ = snap.ref(weight), b_ = snap.ref(bias), s, p, d, transposed, op, g,
          out_ = snap.ref(out)]() {
           // ATen's convolutions have no out= form: the result is scratch
           // in device memory, then copied.
           DeviceMemoryScope scratch(device);
           out_.view().copy_(at::convolution(in_.view(), w_.view(), b_.optional_view(), s, p, d, transposed, op, g));
         });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed, c10::SymIntArrayRef output_padding,
    c10::SymInt groups, std::array<bool, 3> output_mask) {
  const auto device = common_device("convolution_backward", grad_output, input, weight);
  auto s = C10_AS_INTARRAYREF_SLOW(stride).vec(), p = C10_AS_INTARRAYREF_SLOW(padding).vec(), d = C10_AS_INTARRAYREF_SLOW(dilation).vec(), op = C10_AS_INTARRAYREF_SLOW(output_padding).vec();
  const int64_t g = groups.expect_int();
  at::Tensor grad_input, grad_weight, grad_bias;
  // One memory format for both gradients, from the input's and the weight's,
  // as ATen's backends and its meta function choose it (compiled graphs
  // check the strides they get against the meta function's).
  auto memory_format = at::MemoryFormat::Contiguous;
  for (const auto format : {input.suggest_memory_format(), weight.suggest_memory_format()}) {
    if (format == at::MemoryFormat::ChannelsLast || format == at::MemoryFormat::ChannelsLast3d) memory_format = format;
  }
  if (output_mask[0]) grad_input = empty_npu(input.sizes(), {}, input.options().memory_format(memory_format), device);
  if (output_mask[1]) grad_weight = empty_npu(weight.sizes(), {}, weight.options().memory_format(memory_format), device);
  const int64_t out_channels = transposed ? weight.size(1) * g : weight.size(0);
  if (output_mask[2]) grad_bias = empty_npu({out_channels}, {}, grad_output.options(), device);
  LaunchSnapshot snap;
  launch(device, "convolution_backward", {grad_input, grad_weight, grad_bias}, snap,
         [device, go_ = snap.ref(grad_output), in_ = snap.ref(input), w_ = snap.ref(weight), s, p, d, transposed,
          op, g, output_mask, out_channels, gi_ = snap.ref(grad_input), gw_ = snap.ref(grad_weight),
          gb_ = snap.ref(grad_bias)]() {
           DeviceMemoryScope scratch(device);  // as in the forward
           const std::vector<int64_t> bias_sizes{out_channels};
           auto [gi, gw, gb] = at::convolution_backward(go_.view(), in_.view(), w_.view(), bias_sizes, s, p, d,
                                                        transposed, op, g, output_mask);
           if (output_mask[0]) gi_.view().copy_(gi);
           if (output_mask[1]) gw_.view().copy_(gw);
           if (output_mask[2]) gb_.view().copy_(gb);
         });
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(npu_convolution));
  m.impl("convolution_backward_overrideable", TORCH_FN(npu_convolution_backward));
}

}  // namespace torch_npu
