// at_npu::native::OpPreparation: how torch_npu's operators make their
// outputs and move scalars to the device, for extensions that write
// operators the op-plugin way. vNPU's subset: the functions below, with real
// torch_npu's names and signatures, over ATen and NPUFormat.h. (The
// *_op_check helpers, which need op-plugin's internals, are not provided.)
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/core/Scalar.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/Exception.h>

#include "third_party/acl/inc/acl/acl_base.h"
#include "torch_npu/csrc/core/npu/NPUFormat.h"
#include "torch_npu/csrc/framework/OpCommand.h"
#include "torch_npu/csrc/framework/utils/NpuUtils.h"

namespace at_npu {
namespace native {

class OpPreparation {
 public:
  // Outputs like `src` (its dtype and device), in ND format.
  static at::Tensor apply_tensor_without_format(const at::Tensor& src) {
    return apply_tensor_without_format(src, src.sizes());
  }
  static at::Tensor apply_tensor_without_format(const at::Tensor& src, c10::IntArrayRef sizes) {
    return at::empty(sizes, src.options());
  }
  static at::Tensor apply_tensor_without_format(c10::IntArrayRef sizes, const c10::TensorOptions& options) {
    return at::empty(sizes, options);
  }
  // Outputs like `src`, in src's storage format.
  static at::Tensor apply_tensor(const at::Tensor& src) { return apply_tensor(src, src.sizes()); }
  static at::Tensor apply_tensor(const at::Tensor& src, c10::IntArrayRef sizes) {
    return empty_with_format(sizes, src.options(), get_npu_format(src));
  }
  static at::Tensor apply_tensor(const at::Tensor& src, const c10::TensorOptions& options) {
    return empty_with_format(src.sizes(), options, get_npu_format(src));
  }
  static at::Tensor apply_tensor(c10::IntArrayRef sizes, const c10::TensorOptions& options, const at::Tensor& src) {
    return empty_with_format(sizes, options, get_npu_format(src));
  }
  static at::Tensor apply_tensor_with_format(const at::Tensor& src, int64_t format, bool keep_format = false) {
    return empty_with_format(src.sizes(), src.options(), format, keep_format);
  }
  static at::Tensor apply_tensor_with_format(const at::Tensor& src, c10::IntArrayRef sizes, int64_t format,
                                             bool keep_format = false) {
    return empty_with_format(sizes, src.options(), format, keep_format);
  }
  static at::Tensor apply_tensor_with_format(c10::IntArrayRef sizes, const c10::TensorOptions& options,
                                             int64_t format, bool keep_format = false) {
    return empty_with_format(sizes, options, format, keep_format);
  }
  static at::Tensor apply_tensor_with_sizes(c10::IntArrayRef sizes, const c10::TensorOptions& options) {
    return at::empty(sizes, options);
  }

  static int64_t get_tensor_npu_format(const at::Tensor& tensor) { return get_npu_format(tensor); }
  // A tensor in a private format (NZ, NC1HWC0 ...) back in its base ND format.
  static at::Tensor cast_to_ori_format(const at::Tensor& tensor) {
    return get_npu_format(tensor) == ACL_FORMAT_ND || get_npu_format(tensor) == ACL_FORMAT_NCHW
               ? tensor
               : npu_format_cast(tensor, ACL_FORMAT_ND);
  }
  static at::Tensor CastBackToOriFormat(const at::Tensor& tensor) { return cast_to_ori_format(tensor); }

  static bool is_scalar_wrapped_to_tensor(const at::Tensor& tensor) {
    return tensor.dim() == 0 && !tensor.is_privateuseone();
  }
  // A 0-d npu tensor holding `cpu_scalar` as `scalar_data_type`.
  static at::Tensor copy_scalar_to_device(const c10::Scalar& cpu_scalar, at::ScalarType scalar_data_type) {
    return at::scalar_tensor(cpu_scalar, at::TensorOptions().dtype(scalar_data_type))
        .to(c10::Device(c10::DeviceType::PrivateUse1));
  }
  static at::Tensor copy_tensor_host_to_device(const at::Tensor& cpu_tensor) {
    return cpu_tensor.to(c10::Device(c10::DeviceType::PrivateUse1), /*non_blocking=*/false, /*copy=*/true);
  }

  // The cube unit's math mode for matmuls (aclnn's cubeMathType): vNPU
  // computes in the inputs' dtype, i.e. 0 (KEEP_DTYPE), unless HF32 is allowed.
  static int8_t get_cube_math_type(bool allowHf32 = false) { return allowHf32 ? 3 : 0; }
};

}  // namespace native
}  // namespace at_npu
