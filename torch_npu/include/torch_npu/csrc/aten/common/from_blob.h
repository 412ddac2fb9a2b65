// at_npu::native::from_blob: an npu tensor over npu memory the caller owns
// (memory of another tensor, aclrtMalloc, ...), as torch_npu's C++ API has it.
// The tensor does not own `data` unless a deleter is given; the deleter runs
// once, when the storage goes. `data` must be npu memory of the target device
// (default: the options' device if it is npu, else the current device); other
// pointers raise. The storage spans storage_offset plus the elements the
// sizes and strides reach, in bytes of the dtype.
#pragma once

#include <functional>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/OptionalArrayRef.h>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace at_npu {
namespace native {

class TORCH_NPU_API TensorMaker {
  friend TensorMaker for_blob(void* data, at::IntArrayRef sizes) noexcept;

 public:
  TensorMaker& strides(at::OptionalIntArrayRef value) noexcept {
    strides_ = value;
    return *this;
  }
  TensorMaker& storage_offset(std::optional<int64_t> value) noexcept {
    storage_offset_ = value;
    return *this;
  }
  TensorMaker& target_device(std::optional<c10::Device> value) noexcept {
    device_ = value;
    return *this;
  }
  TensorMaker& options(at::TensorOptions value) noexcept {
    opts_ = value;
    return *this;
  }
  TensorMaker& allocator(c10::Allocator* allocator) noexcept {
    allocator_ = allocator;
    return *this;
  }
  TensorMaker& deleter(std::function<void(void*)> value) noexcept {
    deleter_ = std::move(value);
    return *this;
  }

  at::Tensor make_tensor();

 private:
  explicit TensorMaker(void* data, at::IntArrayRef sizes) noexcept : data_{data}, sizes_{sizes} {}

  void* data_;
  at::IntArrayRef sizes_;
  at::OptionalIntArrayRef strides_{};
  std::optional<int64_t> storage_offset_{};
  std::optional<c10::Device> device_{};
  at::TensorOptions opts_{};
  c10::Allocator* allocator_{};
  std::function<void(void*)> deleter_{};
};

inline TensorMaker for_blob(void* data, at::IntArrayRef sizes) noexcept { return TensorMaker{data, sizes}; }

inline at::Tensor from_blob(void* data, at::IntArrayRef sizes, std::function<void(void*)> deleter,
                            const at::TensorOptions& options = {},
                            const std::optional<c10::Device> target_device = std::nullopt) {
  return for_blob(data, sizes).deleter(std::move(deleter)).options(options).target_device(target_device).make_tensor();
}

inline at::Tensor from_blob(void* data, at::IntArrayRef sizes, at::IntArrayRef strides, int64_t storage_offset,
                            const std::function<void(void*)>& deleter, const at::TensorOptions& options = {},
                            const std::optional<c10::Device> target_device = std::nullopt) {
  return for_blob(data, sizes)
      .strides(strides)
      .storage_offset(storage_offset)
      .deleter(deleter)
      .options(options)
      .target_device(target_device)
      .make_tensor();
}

inline at::Tensor from_blob(void* data, at::IntArrayRef sizes, at::IntArrayRef strides,
                            const std::function<void(void*)>& deleter, const at::TensorOptions& options = {},
                            const std::optional<c10::Device> target_device = std::nullopt) {
  return for_blob(data, sizes)
      .strides(strides)
      .deleter(deleter)
      .options(options)
      .target_device(target_device)
      .make_tensor();
}

inline at::Tensor from_blob(void* data, at::IntArrayRef sizes, at::IntArrayRef strides, int64_t storage_offset,
                            const at::TensorOptions& options = {},
                            const std::optional<c10::Device> target_device = std::nullopt) {
  return for_blob(data, sizes)
      .strides(strides)
      .storage_offset(storage_offset)
      .options(options)
      .target_device(target_device)
      .make_tensor();
}

inline at::Tensor from_blob(void* data, at::IntArrayRef sizes,
                            const std::optional<c10::Device> target_device = std::nullopt,
                            const at::TensorOptions& options = {}) {
  return for_blob(data, sizes).options(options).target_device(target_device).make_tensor();
}

inline at::Tensor from_blob(void* data, at::IntArrayRef sizes, at::IntArrayRef strides,
                            const at::TensorOptions& options = {}) {
  return for_blob(data, sizes).strides(strides).options(options).make_tensor();
}

inline at::Tensor from_blob(void* data, at::IntArrayRef sizes, const at::TensorOptions& options = {}) {
  return for_blob(data, sizes).options(options).make_tensor();
}

}  // namespace native
}  // namespace at_npu
