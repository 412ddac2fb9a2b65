// vNPU: the data types of NNAL's Ascend Transformer Boost (ATB) C++ API,
// with ATB's names. A Tensor describes device memory; it does not own it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "acl/acl_base.h"
#include "atb/svector.h"

namespace atb {

using Status = int32_t;
constexpr Status NO_ERROR = 0;
constexpr Status ERROR_INVALID_PARAM = 1;
constexpr Status ERROR_INVALID_TENSOR_DIM = 3;
constexpr Status ERROR_INVALID_TENSOR_SIZE = 4;
constexpr Status ERROR_INVALID_TENSOR_DTYPE = 7;
constexpr Status ERROR_INVALID_TENSOR_NUM = 9;
constexpr Status ERROR_RT_FAIL = 13;

constexpr uint32_t MAX_DIM = 8;

struct Dims {
  int64_t dims[MAX_DIM] = {0};
  uint64_t dimNum = 0;
};

struct TensorDesc {
  aclDataType dtype = ACL_DT_UNDEFINED;
  aclFormat format = ACL_FORMAT_UNDEFINED;
  Dims shape;
};

struct Tensor {
  TensorDesc desc;
  void* deviceData = nullptr;
  void* hostData = nullptr;
  uint64_t dataSize = 0;
};

// The tensors one execution reads (inTensors) and writes (outTensors).
struct VariantPack {
  SVector<Tensor> inTensors;
  SVector<Tensor> outTensors;
};

}  // namespace atb
