// Storage formats (ACL_FORMAT_*) of npu tensors, as torch_npu.npu_format_cast
// sets them. vNPU keeps a tensor's data in ND order whatever its format tag;
// get_npu_storage_sizes reports the shape the tagged format has on Ascend
// (FRACTAL_NZ: [..., ceil(n/c0), ceil(m/16), 16, c0], c0 = 32 bytes / element).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/Optional.h>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace at_npu {
namespace native {

TORCH_NPU_API int64_t get_npu_format(const at::Tensor& self);
TORCH_NPU_API std::vector<int64_t> get_npu_storage_sizes(const at::Tensor& self);
TORCH_NPU_API at::Tensor npu_format_cast(const at::Tensor& self, int64_t acl_format);
TORCH_NPU_API at::Tensor empty_with_format(c10::IntArrayRef sizes, const c10::TensorOptions& options, int64_t format,
                                           bool keep_format = false);
// An uninitialised npu tensor whose storage is swap memory on Ascend (host
// memory mapped into the device); vNPU's device memory is host memory
// already, so this is an empty npu tensor (torch_npu.empty_with_swapped_memory).
TORCH_NPU_API at::Tensor empty_with_swapped_memory(c10::IntArrayRef size, c10::optional<at::ScalarType> dtype_opt,
                                                   c10::optional<c10::Device> device_opt);

}  // namespace native
}  // namespace at_npu
