// vNPU: atb::Utils, sizes of ATB tensors.
#pragma once

#include "atb/types.h"

namespace atb {

class __attribute__((visibility("default"))) Utils {
 public:
  // Bytes of the tensor's data: its element count times its dtype's size.
  static uint64_t GetTensorSize(const Tensor& tensor);
  static uint64_t GetTensorSize(const TensorDesc& tensorDesc);
  static int64_t GetTensorNumel(const Tensor& tensor);
  static int64_t GetTensorNumel(const TensorDesc& tensorDesc);
};

}  // namespace atb
