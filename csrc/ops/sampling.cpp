// Sampling kernels whose result shape the arguments fix: queued like any
// other kernel (so NPU graphs capture them, and a replay draws afresh), with
// ATen's CPU algorithm drawing from the npu generator's seed for this op.
#include <ATen/ops/multinomial.h>
#include <torch/library.h>

#include "csrc/core/npu_generator.h"
#include "csrc/launch/launch.h"

namespace torch_npu {
namespace {

// ATen's argument checks (aten/src/ATen/native/Distributions.cpp), at the
// call; the value checks (negative, inf or NaN weights, a zero sum) are the
// kernel's, reported as device-side errors.
void check_multinomial(const at::Tensor& self, int64_t n_sample, bool with_replacement) {
  TORCH_CHECK(!self.is_complex() && at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  const int64_t n_categories = self.size(-1);
  TORCH_CHECK(with_replacement || (n_sample <= n_categories),
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(n_categories <= (int64_t{1} << 24),
              "number of categories cannot exceed 2^24");
}

at::Tensor& multinomial_into(at::Tensor& result, const at::Tensor& self, int64_t n_sample, bool with_replacement,
                             const std::optional<at::Generator>& generator, c10::DeviceIndex device) {
  const OpSeed seed = draw_op_seed(generator, device);
  LaunchSnapshot snap;
  launch(device, "multinomial", {result}, snap,
         [self_ = snap.ref(self), out_ = snap.ref(result), n_sample, with_replacement, seed]() {
           at::Tensor out = out_.view();
           at::multinomial_out(out, self_.view(), n_sample, with_replacement, cpu_generator_for(seed));
         });
  return result;
}

std::vector<int64_t> multinomial_sizes(const at::Tensor& self, int64_t n_sample) {
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  sizes.back() = n_sample;
  return sizes;
}

at::Tensor npu_multinomial(const at::Tensor& self, int64_t n_sample, bool with_replacement,
                           std::optional<at::Generator> generator) {
  const auto device = common_device("multinomial", self);
  check_multinomial(self, n_sample, with_replacement);
  at::Tensor result = empty_npu(multinomial_sizes(self, n_sample), {}, self.options().dtype(at::kLong), device);
  return multinomial_into(result, self, n_sample, with_replacement, generator, device);
}

at::Tensor& npu_multinomial_out(const at::Tensor& self, int64_t n_sample, bool with_replacement,
                                std::optional<at::Generator> generator, at::Tensor& result) {
  const auto device = common_device("multinomial.out", self, result);
  check_multinomial(self, n_sample, with_replacement);
  TORCH_CHECK(result.scalar_type() == at::kLong, "multinomial expects an int64 (Long) out tensor, got ",
              result.scalar_type());
  result.resize_(multinomial_sizes(self, n_sample));
  return multinomial_into(result, self, n_sample, with_replacement, generator, device);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("multinomial", TORCH_FN(npu_multinomial));
  m.impl("multinomial.out", TORCH_FN(npu_multinomial_out));
}

}  // namespace torch_npu
