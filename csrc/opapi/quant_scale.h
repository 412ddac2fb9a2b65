// The float32 values of a (de)quantisation scale as the quantised aclnn
// operators take it: int64 scales carry float32 bits in their low 32, as
// npu_trans_quant_param makes them; other dtypes are converted.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/bitwise_and.h>

namespace torch_npu {
namespace aclnn {

inline at::Tensor scale_values(const at::Tensor& scale) {
  if (scale.scalar_type() != at::kLong) return scale.to(at::kFloat);
  return at::bitwise_and(scale, 0xFFFFFFFFLL).to(at::kInt).view(at::kFloat);
}

// round half to even, then saturate into int8, as the kernels requantise.
inline at::Tensor saturate_int8(const at::Tensor& y) { return y.round().clamp(-128, 127).to(at::kChar); }

}  // namespace aclnn
}  // namespace torch_npu
