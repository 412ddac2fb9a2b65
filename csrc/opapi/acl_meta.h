// The argument objects of the aclnn operator API (acl_meta.h) and how an
// operator reads them: an aclTensor becomes a CPU tensor viewing the same
// memory (the virtual NPU's memory is host memory), so vNPU's aclnn
// operators compute with ATen's CPU kernels, in stream order.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include "aclnn/acl_meta.h"

struct aclTensor {
  std::vector<int64_t> view_dims;
  std::vector<int64_t> strides;
  int64_t offset = 0;  // in elements, from data
  aclDataType dtype = ACL_DT_UNDEFINED;
  aclFormat format = ACL_FORMAT_ND;
  std::vector<int64_t> storage_dims;
  void* data = nullptr;
};

struct aclScalar {
  c10::Scalar value;
  aclDataType dtype = ACL_DT_UNDEFINED;
};

struct aclIntArray {
  std::vector<int64_t> values;
};

struct aclFloatArray {
  std::vector<float> values;
};

struct aclBoolArray {
  std::vector<bool> values;
};

struct aclTensorList {
  std::vector<const aclTensor*> tensors;  // owned: destroyed with the list, as in CANN
};

struct aclScalarList {
  std::vector<const aclScalar*> scalars;  // owned
};

namespace torch_npu {
namespace aclnn {

// The ScalarType of an aclDataType; throws (c10::Error) for one without.
c10::ScalarType scalar_type_of(aclDataType dtype);

// A CPU tensor viewing the aclTensor's memory (view shape, strides, offset
// over its storage). `what` names the argument in errors. Throws
// c10::Error when the tensor is NULL or malformed.
at::Tensor host_view(const char* what, const aclTensor* tensor);
// host_view, or an undefined tensor for NULL (optional arguments).
at::Tensor optional_host_view(const char* what, const aclTensor* tensor);

}  // namespace aclnn
}  // namespace torch_npu
