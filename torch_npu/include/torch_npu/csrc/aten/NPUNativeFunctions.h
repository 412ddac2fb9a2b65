// torch_npu's native functions for extensions. Real torch_npu generates one
// static member per npu kernel; vNPU declares the free functions extensions
// call (NPUFormat.h: npu_format_cast, empty_with_format, get_npu_format ...)
// and leaves every other operator to the dispatcher (at::..., or
// c10::Dispatcher for torch.ops.npu.*).
#pragma once

#include "torch_npu/csrc/core/npu/NPUFormat.h"

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace at_npu {
namespace native {

// op-plugin's _npu_dropout_gen_mask.Tensor (torch.ops.npu): the packed keep
// mask (one bit per element, 1 = keep with probability 1 - p, uint8 on
// self's device) of prod(size) elements, drawn from (seed, offset): the same
// pair gives the same mask. `parallel` and `sync` only tune the chip's kernel.
TORCH_NPU_API at::Tensor npu_dropout_gen_mask(const at::Tensor& self, at::IntArrayRef size, double p, int64_t seed,
                                              int64_t offset, std::optional<bool> parallel = std::nullopt,
                                              std::optional<bool> sync = std::nullopt);

}  // namespace native
}  // namespace at_npu
