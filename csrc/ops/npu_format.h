// Storage format tags (npu_format.cpp): what other kernels ask of them.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_npu {

// The ACL format of an npu tensor's storage: its tag, the tag of the tensor
// it views, or its base format (NCHW for 4-d tensors, ND otherwise).
int64_t get_npu_format(const at::Tensor& self);

}  // namespace torch_npu
