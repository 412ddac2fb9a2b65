// Asynchronous native kernels for in-place ops, by schema rather than by
// hand: an in-place op writes into tensors that already exist, so stage 1
// has no shape to infer. It snapshots the arguments (drawing a seed for
// random ops) and queues the CPU kernel; the caller gets `self` back at once.
//
// Only ops on kInplaceOps are routed here: in-place ops that change
// metadata (resize_, t_, squeeze_, set_ ...) must not be.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/index.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/library.h>

#include "csrc/ops/boxed_call.h"
#include "csrc/ops/launch.h"
#include "csrc/ops/sync_kernel.h"

namespace torch_npu {
namespace {

// In-place ops without a structured kernel, whose CPU kernel only writes
// element values. (masked_fill_.Tensor is not here: like CUDA it reads the
// value tensor on the host, so it takes the synchronous path.) Structured in-place ops (add_, mul_, clamp_ ...) come from
// the generated kernels instead.
constexpr const char* kInplaceOps[] = {
    "fill_.Scalar", "fill_.Tensor", "zero_",
    "uniform_", "normal_", "bernoulli_.float", "bernoulli_.Tensor", "random_", "random_.from",
    "random_.to", "exponential_", "geometric_", "log_normal_", "cauchy_",
    "masked_fill_.Scalar", "index_fill_.int_Scalar", "index_fill_.int_Tensor",
    "_index_put_impl_", "put_", "masked_scatter_",
    "_amp_foreach_non_finite_check_and_unscale_", "_amp_update_scale_",
};

// Ops whose parameters cannot be wrong in a way the CPU kernel would catch
// (and which are hot): no dry run.
bool needs_dry_run(const c10::OperatorHandle& op) {
  const std::string& name = op.operator_name().name;
  return name != "aten::fill_" && name != "aten::zero_" && name != "aten::_amp_update_scale_" &&
         name != "aten::_amp_foreach_non_finite_check_and_unscale_";
}

// Runs the CPU kernel on one-element stand-ins of the npu tensors, on the
// caller: the kernel's argument checks (normal_ with std < 0, masked_fill_
// with a 1-dim value or a value that overflows the dtype, ...) then raise at
// the call, as they do on the CPU, instead of later on the stream.
bool dry_run(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  torch::jit::Stack stack = stand_in_stack(op, args);
  return dry_run_passes(op, stack);
}

// The one-element dry run cannot see shape mismatches, so the arguments that
// broadcast against `self` (masked_fill_'s and masked_scatter_'s mask,
// bernoulli_'s p) are checked here, with TensorIterator's messages.
void check_broadcast_against_self(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  const auto& arguments = op.schema().arguments();
  if (args.empty() || !args[0].isTensor()) return;
  const at::Tensor& self = args[0].toTensor();
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& name = arguments[i].name();
    if ((name != "mask" && name != "p") || !args[i].isTensor()) continue;
    const auto shape = at::infer_size(self.sizes(), args[i].toTensor().sizes());
    TORCH_CHECK(c10::IntArrayRef(shape) == self.sizes(), "output with shape ", self.sizes(),
                " doesn't match the broadcast shape ", c10::IntArrayRef(shape));
  }
}

// The tensors an in-place op writes: its `Tensor(a!)` arguments.
KernelOutputs mutated_arguments(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
  KernelOutputs outputs;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto* info = schema.arguments()[i].alias_info();
    if (info == nullptr || !info->isWrite()) continue;
    if (args[i].isTensor()) {
      outputs.add(args[i].toTensor());
    } else if (args[i].isTensorList()) {
      for (const at::Tensor& t : args[i].toTensorList()) outputs.add(t);
    }
  }
  return outputs;
}

// index_put_ checks that the values broadcast to the indexing result inside
// its CPU kernel; the one-element dry run cannot see it. With integer
// indices the result's shape follows from the shapes alone: work it out on
// meta tensors and check here, with ATen's message. (Boolean masks make the
// shape data-dependent: those are left to the kernel.)
void check_index_put_shapes(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  if (op.operator_name().name != "aten::_index_put_impl_") return;
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& values = args[2].toTensor();
  c10::List<std::optional<at::Tensor>> meta_indices;
  for (const std::optional<at::Tensor>& index : args[1].toOptionalTensorList()) {
    if (index.has_value() && index->defined()) {
      if (!c10::isIntegralType(index->scalar_type(), /*includeBool=*/false)) return;
      meta_indices.push_back(at::empty(index->sizes(), index->options().device(c10::kMeta)));
    } else {
      meta_indices.push_back(std::nullopt);
    }
  }
  const at::Tensor meta_self = at::empty_strided(self.sizes(), self.strides(), self.options().device(c10::kMeta));
  at::Tensor result;
  try {
    result = at::index(meta_self, meta_indices);
  } catch (const c10::Error&) {
    return;  // the kernel reports bad indices itself, with the real tensors
  }
  TORCH_CHECK(at::is_expandable_to(values.sizes(), result.sizes()), "shape mismatch: value tensor of shape ",
              values.sizes(), " cannot be broadcast to indexing result of shape ", result.sizes());
}

void async_inplace_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  auto args = torch::jit::last(*stack, num_args);
  const c10::DeviceIndex device = op_device(op, args);
  check_broadcast_against_self(op, args);
  check_index_put_shapes(op, args);
  if (needs_dry_run(op) && !dry_run(op, args)) {
    sync_native_kernel(op, keys, stack);  // raises ATen's own error
    return;
  }
  BoxedSnapshot call(schema, args, device);
  const char* name = op.operator_name().name.c_str();
  launch(device, name, mutated_arguments(schema, args), [call = std::move(call), op]() {
    torch::jit::Stack cpu_stack = call.to_stack();
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu_stack);
  });
  // Returns alias arguments (`Tensor(a!)`): hand back the caller's tensors.
  std::vector<c10::IValue> returns;
  for (const auto& ret : schema.returns()) {
    size_t aliased = 0;
    for (size_t i = 0; i < num_args; ++i) {
      const auto* info = schema.arguments()[i].alias_info();
      if (info != nullptr && ret.alias_info() != nullptr && *info == *ret.alias_info()) aliased = i;
    }
    returns.push_back(args[aliased]);
  }
  torch::jit::drop(*stack, num_args);
  for (auto& r : returns) stack->push_back(std::move(r));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : kInplaceOps) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&async_inplace_kernel>());
  }
}

}  // namespace torch_npu
