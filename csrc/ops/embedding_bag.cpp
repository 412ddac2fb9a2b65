// EmbeddingBag on npu: ATen's CPU kernel, on the synchronous native path (its
// outputs' sizes depend on the offsets), after the check the device kernels
// make first. A per_sample_weights of another dtype than the weight is
// refused in the words of torch_npu's (and CUDA's) kernel, "expected scalar
// type Float but found Double"; ATen's CPU kernel words it "Expected tensor
// for argument #1 'weight' to have the same type as ...", and real
// torch_npu's tests expect the device's words on npu.
#include <torch/library.h>

#include "csrc/launch/sync_kernel.h"

namespace torch_npu {
namespace {

void check_then_run(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto args = torch::jit::last(*stack, schema.arguments().size());
  const auto weights_at = schema.argumentIndexWithName("per_sample_weights");
  if (weights_at.has_value() && args[*weights_at].isTensor()) {
    const at::Tensor& weight = args[0].toTensor();
    const at::Tensor& per_sample_weights = args[*weights_at].toTensor();
    TORCH_CHECK(!per_sample_weights.defined() || per_sample_weights.scalar_type() == weight.scalar_type(),
                "expected scalar type ",
                weight.scalar_type(), " but found ", per_sample_weights.scalar_type());
  }
  sync_native_kernel(op, keys, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"_embedding_bag", "_embedding_bag_forward_only"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&check_then_run>());
  }
}

}  // namespace torch_npu
