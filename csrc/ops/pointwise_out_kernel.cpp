// Asynchronous `out=` kernels for element-wise ops that ATen implements
// without a structured meta function (abs.out, logical_and.out, ...), by
// schema: the result has the broadcast shape of the inputs, so stage 1
// resizes `out`, validates the call with a one-element dry run on the CPU
// (dtype and argument checks raise at the call, as on the CPU), and queues
// the CPU kernel.
#include "csrc/ops/launch.h"

#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "csrc/ops/boxed_call.h"
#include "csrc/ops/sync_kernel.h"

namespace torch_npu {
namespace {

constexpr const char* kPointwiseOutOps[] = {
    "abs.out", "logical_not.out", "logical_and.out", "logical_or.out", "logical_xor.out",
    "conj_physical.out", "where.self_out",
};

void pointwise_out_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  auto args = torch::jit::last(*stack, num_args);
  const c10::DeviceIndex device = op_device(op, args);

  // The broadcast shape of the inputs, and the out argument.
  std::vector<int64_t> shape;
  size_t out_index = num_args;
  for (size_t i = 0; i < num_args; ++i) {
    if (schema.arguments()[i].is_out()) {
      out_index = i;
    } else if (args[i].isTensor()) {
      shape = at::infer_size(shape, args[i].toTensor().sizes());
    }
  }
  TORCH_INTERNAL_ASSERT(out_index < num_args && args[out_index].isTensor(), op.operator_name(), " has no out=");
  const at::Tensor& out = args[out_index].toTensor();

  // Dry run on one-element CPU stand-ins of the same rank: dtype and
  // argument errors raise now, not later on the stream.
  torch::jit::Stack dry = stand_in_stack(op, args);
  dry[out_index] = stand_in(out, static_cast<int64_t>(shape.size()));
  if (!dry_run_passes(op, dry)) {
    sync_native_kernel(op, keys, stack);  // raises ATen's own error
    return;
  }

  at::native::resize_output(out, shape);
  BoxedSnapshot call(schema, args, device);  // after the resize
  launch(device, op.operator_name().name.c_str(), {out}, [call = std::move(call), op]() {
    torch::jit::Stack cpu_stack = call.to_stack();
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu_stack);
  });
  c10::IValue result = args[out_index];
  torch::jit::drop(*stack, num_args);
  stack->push_back(std::move(result));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : kPointwiseOutOps) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&pointwise_out_kernel>());
  }
}

}  // namespace torch_npu
