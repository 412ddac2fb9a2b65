// Whether `p.data = t` may swap a tensor's data between cpu and npu.
//
// nn.Module.to/.npu()/.cpu() keep each Parameter object and assign its new
// data (`param.data = moved`) when aten::_has_compatible_shallow_copy_type
// says the two tensors can share one TensorImpl; otherwise they make a new
// Parameter, and an optimizer built before the move keeps stepping the old
// CPU ones (a model that silently stops learning). c10's TensorImpl treats
// CPU, CUDA and a few named backends as interchangeable dense tensors but
// not PrivateUse1, so npu registers its own answer: dense strided tensors
// of cpu and npu are compatible with each other, as cpu and cuda are.
// Any call that sees an npu tensor dispatches here (PrivateUse1 outranks CPU).
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

bool is_dense_cpu_or_npu(const at::Tensor& t) {
  const auto type = t.device().type();
  return t.layout() == c10::kStrided && !t.is_quantized() && !t.is_nested() &&
         t.key_set().has(c10::DispatchKey::Dense) && (type == c10::kCPU || type == c10::kPrivateUse1);
}

bool npu_has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (is_dense_cpu_or_npu(self) && is_dense_cpu_or_npu(from));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(npu_has_compatible_shallow_copy_type));
}

}  // namespace torch_npu
