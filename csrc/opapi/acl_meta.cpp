// aclCreateTensor and the other argument objects of the aclnn API.
#include "csrc/opapi/acl_meta.h"

#include <new>

#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include "aclnn/aclnn_base.h"
#include "csrc/api/acl_status.h"

namespace torch_npu {
namespace aclnn {

c10::ScalarType scalar_type_of(aclDataType dtype) {
  switch (dtype) {
    case ACL_FLOAT: return c10::kFloat;
    case ACL_FLOAT16: return c10::kHalf;
    case ACL_BF16: return c10::kBFloat16;
    case ACL_DOUBLE: return c10::kDouble;
    case ACL_INT8: return c10::kChar;
    case ACL_UINT8: return c10::kByte;
    case ACL_INT16: return c10::kShort;
    case ACL_UINT16: return c10::kUInt16;
    case ACL_INT32: return c10::kInt;
    case ACL_UINT32: return c10::kUInt32;
    case ACL_INT64: return c10::kLong;
    case ACL_UINT64: return c10::kUInt64;
    case ACL_BOOL: return c10::kBool;
    case ACL_COMPLEX64: return c10::kComplexFloat;
    case ACL_COMPLEX128: return c10::kComplexDouble;
    default: TORCH_CHECK(false, "aclDataType ", static_cast<int>(dtype), " has no tensor dtype on vNPU");
  }
}

at::Tensor host_view(const char* what, const aclTensor* tensor) {
  TORCH_CHECK(tensor != nullptr, what, " is nullptr.");
  TORCH_CHECK(tensor->view_dims.size() == tensor->strides.size(), what, ": view has ", tensor->view_dims.size(),
              " dims but ", tensor->strides.size(), " strides.");
  const c10::ScalarType type = scalar_type_of(tensor->dtype);
  int64_t storage_numel = 1;
  for (int64_t d : tensor->storage_dims) storage_numel *= d;
  // The furthest element the view reaches must lie inside the storage.
  int64_t last = tensor->offset;
  bool empty = false;
  for (size_t i = 0; i < tensor->view_dims.size(); ++i) {
    TORCH_CHECK(tensor->view_dims[i] >= 0, what, ": negative view dim ", tensor->view_dims[i], ".");
    if (tensor->view_dims[i] == 0) empty = true;
    last += (tensor->view_dims[i] - 1) * tensor->strides[i];
  }
  TORCH_CHECK(empty || (tensor->offset >= 0 && last < storage_numel), what,
              ": the view (offset ", tensor->offset, ") reaches element ", last, " of a storage of ", storage_numel,
              " elements.");
  TORCH_CHECK(empty || tensor->data != nullptr, what, " has no data (tensorData is nullptr).");
  at::Tensor storage = at::from_blob(tensor->data, {storage_numel}, at::TensorOptions().dtype(type));
  return storage.as_strided(tensor->view_dims, tensor->strides, tensor->offset);
}

at::Tensor optional_host_view(const char* what, const aclTensor* tensor) {
  return tensor == nullptr ? at::Tensor() : host_view(what, tensor);
}

namespace {

c10::Scalar scalar_from(const void* value, aclDataType dtype) {
  switch (dtype) {
    case ACL_FLOAT: return *static_cast<const float*>(value);
    case ACL_FLOAT16: return *static_cast<const c10::Half*>(value);
    case ACL_BF16: return *static_cast<const c10::BFloat16*>(value);
    case ACL_DOUBLE: return *static_cast<const double*>(value);
    case ACL_INT8: return *static_cast<const int8_t*>(value);
    case ACL_UINT8: return *static_cast<const uint8_t*>(value);
    case ACL_INT16: return *static_cast<const int16_t*>(value);
    case ACL_INT32: return *static_cast<const int32_t*>(value);
    case ACL_INT64: return *static_cast<const int64_t*>(value);
    case ACL_UINT32: return static_cast<int64_t>(*static_cast<const uint32_t*>(value));
    case ACL_BOOL: return *static_cast<const bool*>(value);
    case ACL_COMPLEX64: return *static_cast<const c10::complex<float>*>(value);
    case ACL_COMPLEX128: return *static_cast<const c10::complex<double>*>(value);
    default: TORCH_CHECK(false, "aclCreateScalar: aclDataType ", static_cast<int>(dtype), " is not supported");
  }
}

// Creation reports a failure as NULL with the reason for aclGetRecentErrMsg.
template <typename Body>
auto create(const char* api, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const c10::Error& e) {
    acl::fail(ACLNN_ERR_PARAM_INVALID, std::string(api) + ": " + e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    acl::fail(ACLNN_ERR_INNER, std::string(api) + ": out of host memory");
  }
  return nullptr;
}

template <typename T>
aclnnStatus destroy(const T* object) {
  delete object;
  return ACLNN_SUCCESS;
}

}  // namespace
}  // namespace aclnn
}  // namespace torch_npu

using torch_npu::aclnn::create;
using torch_npu::aclnn::destroy;

extern "C" {

aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType, const int64_t* stride,
                           int64_t offset, aclFormat format, const int64_t* storageDims, uint64_t storageDimsNum,
                           void* tensorData) {
  return create("aclCreateTensor", [&] {
    TORCH_CHECK(viewDimsNum == 0 || viewDims != nullptr, "viewDims is nullptr");
    TORCH_CHECK(viewDimsNum == 0 || stride != nullptr, "stride is nullptr");
    TORCH_CHECK(storageDimsNum == 0 || storageDims != nullptr, "storageDims is nullptr");
    auto* t = new aclTensor();
    t->view_dims.assign(viewDims, viewDims + viewDimsNum);
    t->strides.assign(stride, stride + viewDimsNum);
    t->offset = offset;
    t->dtype = dataType;
    t->format = format;
    t->storage_dims.assign(storageDims, storageDims + storageDimsNum);
    t->data = tensorData;
    return t;
  });
}

aclScalar* aclCreateScalar(void* value, aclDataType dataType) {
  return create("aclCreateScalar", [&] {
    TORCH_CHECK(value != nullptr, "value is nullptr");
    return new aclScalar{torch_npu::aclnn::scalar_from(value, dataType), dataType};
  });
}

aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
  return create("aclCreateIntArray", [&] {
    TORCH_CHECK(size == 0 || value != nullptr, "value is nullptr");
    return new aclIntArray{std::vector<int64_t>(value, value + size)};
  });
}

aclFloatArray* aclCreateFloatArray(const float* value, uint64_t size) {
  return create("aclCreateFloatArray", [&] {
    TORCH_CHECK(size == 0 || value != nullptr, "value is nullptr");
    return new aclFloatArray{std::vector<float>(value, value + size)};
  });
}

aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
  return create("aclCreateBoolArray", [&] {
    TORCH_CHECK(size == 0 || value != nullptr, "value is nullptr");
    return new aclBoolArray{std::vector<bool>(value, value + size)};
  });
}

aclTensorList* aclCreateTensorList(const aclTensor* const* value, uint64_t size) {
  return create("aclCreateTensorList", [&] {
    TORCH_CHECK(size == 0 || value != nullptr, "value is nullptr");
    return new aclTensorList{std::vector<const aclTensor*>(value, value + size)};
  });
}

aclScalarList* aclCreateScalarList(const aclScalar* const* value, uint64_t size) {
  return create("aclCreateScalarList", [&] {
    TORCH_CHECK(size == 0 || value != nullptr, "value is nullptr");
    return new aclScalarList{std::vector<const aclScalar*>(value, value + size)};
  });
}

aclnnStatus aclDestroyTensor(const aclTensor* tensor) { return destroy(tensor); }
aclnnStatus aclDestroyScalar(const aclScalar* scalar) { return destroy(scalar); }
aclnnStatus aclDestroyIntArray(const aclIntArray* array) { return destroy(array); }
aclnnStatus aclDestroyFloatArray(const aclFloatArray* array) { return destroy(array); }
aclnnStatus aclDestroyBoolArray(const aclBoolArray* array) { return destroy(array); }

aclnnStatus aclDestroyTensorList(const aclTensorList* array) {
  if (array != nullptr) {
    for (const aclTensor* t : array->tensors) delete t;
  }
  return destroy(array);
}

aclnnStatus aclDestroyScalarList(const aclScalarList* array) {
  if (array != nullptr) {
    for (const aclScalar* s : array->scalars) delete s;
  }
  return destroy(array);
}

aclnnStatus aclGetViewShape(const aclTensor* tensor, int64_t** viewDims, uint64_t* viewDimsNum) {
  if (tensor == nullptr || viewDims == nullptr || viewDimsNum == nullptr) {
    return torch_npu::acl::fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetViewShape: an argument is nullptr");
  }
  *viewDimsNum = tensor->view_dims.size();
  *viewDims = new int64_t[tensor->view_dims.size() + 1];
  std::copy(tensor->view_dims.begin(), tensor->view_dims.end(), *viewDims);
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetDataType(const aclTensor* tensor, aclDataType* dataType) {
  if (tensor == nullptr || dataType == nullptr) {
    return torch_npu::acl::fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetDataType: an argument is nullptr");
  }
  *dataType = tensor->dtype;
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetFormat(const aclTensor* tensor, aclFormat* format) {
  if (tensor == nullptr || format == nullptr) {
    return torch_npu::acl::fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetFormat: an argument is nullptr");
  }
  *format = tensor->format;
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetIntArraySize(const aclIntArray* array, uint64_t* size) {
  if (array == nullptr || size == nullptr) {
    return torch_npu::acl::fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetIntArraySize: an argument is nullptr");
  }
  *size = array->values.size();
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetTensorListSize(const aclTensorList* tensorList, uint64_t* size) {
  if (tensorList == nullptr || size == nullptr) {
    return torch_npu::acl::fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetTensorListSize: an argument is nullptr");
  }
  *size = tensorList->tensors.size();
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnInit(const char* configPath) { return ACLNN_SUCCESS; }
aclnnStatus aclnnFinalize(void) { return ACLNN_SUCCESS; }

}  // extern "C"
