// What the quantised aclnn operators share: their scales, their int8
// products and their requantisation.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/bitwise_and.h>
#include <ATen/ops/matmul.h>

namespace torch_npu {
namespace aclnn {

// The float32 values of a (de)quantisation scale: int64 scales carry float32
// bits in their low 32, as npu_trans_quant_param makes them; other dtypes are
// converted.
inline at::Tensor scale_values(const at::Tensor& scale) {
  if (scale.scalar_type() != at::kLong) return scale.to(at::kFloat);
  return at::bitwise_and(scale, 0xFFFFFFFFLL).to(at::kInt).view(at::kFloat);
}

// a @ w of int8 operands in float64, where the sums are exact (as the
// device's int32 accumulator is, for K < 2^37 / 127^2).
inline at::Tensor exact_int8_matmul(const at::Tensor& a, const at::Tensor& w) {
  return at::matmul(a.to(at::kDouble), w.to(at::kDouble));
}

// round half to even, then saturate into int8, as the kernels requantise.
inline at::Tensor saturate_int8(const at::Tensor& y) { return y.round().clamp(-128, 127).to(at::kChar); }

}  // namespace aclnn
}  // namespace torch_npu
