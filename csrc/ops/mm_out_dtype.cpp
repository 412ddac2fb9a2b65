// mm with an output dtype (aten::mm.dtype, mm.dtype_out): fp16/bf16 inputs
// multiplied into an fp32 result, or an ordinary mm when out_dtype is the
// inputs' dtype. ATen implements it for CUDA only (no CPU kernel, so the CPU
// fallback cannot serve it); torch_npu has it, and so do the AOTI C shim's
// callers (aoti_torch_npu_mm_dtype_out). Composed from npu ops: the inputs
// are widened, then multiplied with fp32 accumulation.
#include "csrc/launch/launch.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

void check_out_dtype(const at::Tensor& self, const at::Tensor& mat2, c10::ScalarType out_dtype) {
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(), "mm: expected self and mat2 to have the same dtype, but got ",
              self.scalar_type(), " and ", mat2.scalar_type());
  const bool widening = out_dtype == at::kFloat &&
                        (self.scalar_type() == at::kHalf || self.scalar_type() == at::kBFloat16);
  TORCH_CHECK(out_dtype == self.scalar_type() || widening,
              "out_dtype must be the same as input dtype or fp32 for fp16/bf16 inputs");
}

at::Tensor& mm_dtype_out(const at::Tensor& self, const at::Tensor& mat2, c10::ScalarType out_dtype, at::Tensor& out) {
  common_device("mm.dtype_out", self, mat2, out);
  check_out_dtype(self, mat2, out_dtype);
  TORCH_CHECK(out.scalar_type() == out_dtype, "mm.dtype_out: expected out to have dtype ", out_dtype, ", got ",
              out.scalar_type());
  return at::mm_out(out, self.to(out_dtype), mat2.to(out_dtype));
}

at::Tensor mm_dtype(const at::Tensor& self, const at::Tensor& mat2, c10::ScalarType out_dtype) {
  check_out_dtype(self, mat2, out_dtype);
  TORCH_CHECK(self.dim() == 2 && mat2.dim() == 2, "mm: expected 2D tensors, got ", self.dim(), "D and ", mat2.dim(),
              "D");
  at::Tensor out = at::empty({self.size(0), mat2.size(1)}, self.options().dtype(out_dtype));
  return mm_dtype_out(self, mat2, out_dtype, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm.dtype", TORCH_FN(mm_dtype));
  m.impl("mm.dtype_out", TORCH_FN(mm_dtype_out));
}

}  // namespace torch_npu
