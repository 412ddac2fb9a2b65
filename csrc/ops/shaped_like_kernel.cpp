// Asynchronous kernels, by schema, for functional ops whose results have a
// shape stage 1 can state without a meta function: "like argument k"
// (hardtanh, log_sigmoid_forward, ...) or a pooling output size. Stage 1
// runs the CPU kernel on one-element stand-ins (argument checks raise at the
// call, and the dry run's results give the output dtypes), allocates the
// outputs, and queues the CPU kernel; stage 2 copies its results into them.
#include "csrc/ops/launch.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/library.h>

#include <string_view>

#include "csrc/ops/boxed_call.h"
#include "csrc/ops/sync_kernel.h"

namespace torch_npu {
namespace {

// Op -> the argument whose shape every result takes (-1: adaptive pooling,
// whose result is self's leading dims followed by output_size).
struct ShapeRule {
  const char* op;
  int like_argument;
};
constexpr ShapeRule kRules[] = {
    {"hardtanh", 0}, {"hardtanh_backward", 0}, {"log_sigmoid_forward", 0}, {"log_sigmoid_backward", 0},
    {"_adaptive_avg_pool2d", -1}, {"_adaptive_avg_pool2d_backward", 1},
};

int like_argument(const c10::OperatorHandle& op) {
  const std::string& name = op.operator_name().name;  // "aten::hardtanh"
  const std::string_view bare = std::string_view(name).substr(6);
  for (const auto& rule : kRules) {
    if (bare == rule.op) return rule.like_argument;
  }
  TORCH_INTERNAL_ASSERT(false, "no shape rule for ", name);
}

std::vector<int64_t> result_shape(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  const int like = like_argument(op);
  if (like >= 0) return args[like].toTensor().sizes().vec();
  const at::Tensor& self = args[0].toTensor();  // adaptive pooling
  const auto output_size = args[1].toIntVector();
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - output_size.size());
  shape.insert(shape.end(), output_size.begin(), output_size.end());
  return shape;
}

void shaped_like_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  auto args = torch::jit::last(*stack, num_args);
  const c10::DeviceIndex device = op_device(op, args);

  // Dry run: validates the call, and its results carry the output dtypes.
  torch::jit::Stack dry = stand_in_stack(op, args);
  if (!dry_run_passes(op, dry)) {
    sync_native_kernel(op, keys, stack);  // raises ATen's own error
    return;
  }

  const auto shape = result_shape(op, args);
  const at::Tensor& like = args[like_argument(op) >= 0 ? like_argument(op) : 0].toTensor();
  std::vector<at::Tensor> outputs;
  for (const c10::IValue& r : dry) {
    outputs.push_back(empty_npu(shape, {}, like.options().dtype(r.toTensor().scalar_type())
                                              .memory_format(like.suggest_memory_format()), device));
  }
  BoxedSnapshot call(schema, args, device);
  launch(device, op.operator_name().name.c_str(), KernelOutputs(outputs),
         [call = std::move(call), op, outs = snapshot(at::ITensorListRef(outputs))]() {
           torch::jit::Stack cpu_stack = call.to_stack();
           op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu_stack);
           for (size_t i = 0; i < outs.size(); ++i) outs[i].view().copy_(cpu_stack[i].toTensor());
         });
  torch::jit::drop(*stack, num_args);
  for (auto& out : outputs) stack->emplace_back(std::move(out));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const auto& rule : kRules) {
    m.impl(rule.op, torch::CppFunction::makeFromBoxedFunction<&shaped_like_kernel>());
  }
}

}  // namespace torch_npu
