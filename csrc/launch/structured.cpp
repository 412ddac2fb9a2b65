#include "csrc/launch/structured.h"

#include "csrc/launch/device_check.h"

namespace torch_npu {

// Mirrors the checks ATen's generated CPU wrappers make for in-place ops.
at::Tensor indices_as_int64(const at::Tensor& indices) {
  const auto dtype = indices.scalar_type();
  if (dtype == at::kLong || !at::isIntegralType(dtype, /*includeBool=*/false)) return indices;
  return indices.to(at::kLong);
}

bool operands_of_one_dense_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() && b.defined() && a.device() == b.device() && a.is_privateuseone() &&
         a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && a.is_contiguous() &&
         b.is_contiguous();
}

void check_inplace_output(const at::Tensor& self, c10::IntArrayRef sizes,
                          const c10::TensorOptions& options) {
  TORCH_CHECK(options.dtype() == self.dtype(), "Bad in-place call: input tensor dtype ",
              self.dtype(), " and output tensor dtype ", options.dtype(), " should match");
  TORCH_CHECK(sizes == self.sizes(), "Bad in-place call: input tensor size ", self.sizes(),
              " and output tensor size ", sizes, " should match");
}

// Mirrors ATen's resize_out for `out=` arguments: same dtype required,
// resized (with a warning when non-empty) to the expected shape.
void resize_out_tensor(const at::Tensor& out, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                       const c10::TensorOptions& options) {
  TORCH_CHECK(options.dtype() == out.dtype(), "Expected out tensor to have dtype ",
              options.dtype(), ", but got ", out.dtype(), " instead");
  check_output_on_npu(out);
  if (at::native::resize_output(out, sizes)) {
    if (!strides.empty()) {
      out.as_strided_(sizes, strides);
    } else if (options.memory_format_opt().has_value()) {
      out.unsafeGetTensorImpl()->empty_tensor_restride(*options.memory_format_opt());
    }
  }
}

void restride_like(const at::Tensor& out, const at::Tensor& like) {
  const auto format = like.suggest_memory_format();
  if (!out.is_contiguous(format)) out.unsafeGetTensorImpl()->empty_tensor_restride(format);
}

}  // namespace torch_npu
