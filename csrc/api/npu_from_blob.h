// A contiguous npu tensor over npu memory it does not own, for the Python
// bindings (torchair.llm_datadist.create_npu_tensors): at_npu::native::
// from_blob's checks (the memory must be the device's, with room for the
// tensor) without the public header's include path.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace torch_npu {

at::Tensor npu_tensor_over_memory(void* data, const std::vector<int64_t>& sizes, at::ScalarType dtype,
                                  c10::DeviceIndex device);

}  // namespace torch_npu
