// op-plugin's C++ entry points (torch_npu's third_party/op-plugin
// ops.h): functions an extension calls directly instead of through the
// dispatcher. Each calls vNPU's registration of the operator.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Optional.h>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace at_npu {
namespace native {

// A dropout keep-mask of prod(size) bits (1: keep, with probability 1 - p),
// packed 8 per uint8 and padded to 128 elements, drawn from (seed, offset):
// the same pair gives the same mask (npu::_npu_dropout_gen_mask.Tensor on
// self's device).
TORCH_NPU_API at::Tensor npu_dropout_gen_mask(const at::Tensor &self, at::IntArrayRef size, double p, int64_t seed,
                                              int64_t offset, c10::optional<bool> parallel, c10::optional<bool> sync);

}  // namespace native
}  // namespace at_npu
