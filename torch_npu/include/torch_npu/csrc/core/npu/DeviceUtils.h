// torch_npu::utils: is a tensor, its options or a device on the NPU, and the
// device type npu tensors carry (PrivateUse1, named "npu").
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/Exception.h>

#include "torch_npu/csrc/core/npu/NPUException.h"
#include "torch_npu/csrc/core/npu/NPUFunctions.h"

namespace torch_npu {
namespace utils {

inline bool is_npu(const at::Tensor& tensor) { return tensor.is_privateuseone(); }
inline bool is_npu(const at::TensorOptions& options) { return options.device().is_privateuseone(); }
inline bool is_npu(const at::Device& device) { return device.is_privateuseone(); }

inline void torch_check_npu(const at::Tensor& tensor) {
  TORCH_CHECK(is_npu(tensor), "Expected NPU tensor, please check whether the input tensor device is correct.",
              PTA_ERROR(ErrCode::PARAM));
}
inline void torch_check_npu(const at::TensorOptions& options) {
  TORCH_CHECK(is_npu(options), "Expected NPU tensor, please check whether the input tensor device is correct.",
              PTA_ERROR(ErrCode::PARAM));
}
inline void torch_check_npu(const at::Device& device) {
  TORCH_CHECK(is_npu(device), "Expected NPU tensor, please check whether the input tensor device is correct.",
              PTA_ERROR(ErrCode::PARAM));
}

inline c10::DeviceType get_npu_device_type() { return c10::DeviceType::PrivateUse1; }

// The virtual NPU initialises on first use; this validates the index.
inline void maybe_initialize_npu(const at::Device& device) {
  if (is_npu(device) && device.has_index()) {
    TORCH_CHECK(device.index() < c10_npu::device_count(), "npu device ", static_cast<int>(device.index()),
                " init failed.", PTA_ERROR(ErrCode::INTERNAL));
  }
}
inline void maybe_initialize_npu(const at::TensorOptions& options) { maybe_initialize_npu(options.device()); }
inline void maybe_initialize_npu(const std::optional<at::Device>& device) {
  if (device) maybe_initialize_npu(*device);
}

}  // namespace utils
}  // namespace torch_npu
