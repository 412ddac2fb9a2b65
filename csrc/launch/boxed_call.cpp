#include "csrc/launch/boxed_call.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/zeros.h>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_generator.h"
#include "csrc/launch/launch.h"

namespace torch_npu {
namespace {

bool is_npu(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

// Ops that accept CPU index tensors next to device tensors on CUDA too
// (device_check: NoCheck in ATen); every other op must get npu tensors only.
bool accepts_cpu_tensors(const c10::OperatorHandle& op) {
  const std::string& name = op.operator_name().name;
  return name == "aten::index" || name == "aten::index_put_" || name == "aten::_index_put_impl_" ||
         name == "aten::index_put" ||
         // A nested tensor's sizes, strides and offsets are host tensors, as on CUDA.
         name == "aten::_nested_from_padded" || name == "aten::_nested_view_from_buffer" ||
         name == "aten::_nested_view_from_buffer_copy";
}

}  // namespace

c10::DeviceIndex op_device(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  // The operator's name lives as long as the operator: no string is built
  // on this path unless an error message needs it.
  DeviceCheck check(op.operator_name().name.c_str());
  bool any_tensor = false;
  const bool cpu_ok = accepts_cpu_tensors(op);
  auto add = [&](const at::Tensor& t) {
    if (is_npu(t)) {
      check.add(t);
      any_tensor = true;
    } else if (t.defined() && !cpu_ok) {
      check.add(t);  // raises for CPU tensors other than 0-dim scalars
    }
  };
  const auto& params = op.schema().arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& arg = args[i];
    if (arg.isTensor()) {
      if (i < params.size() && params[i].is_out()) check_output_on_npu(arg.toTensor());
      add(arg.toTensor());
    } else if (arg.isTensorList()) {
      for (const at::Tensor& t : arg.toTensorList()) add(t);
    } else if (arg.isOptionalTensorList()) {
      for (const std::optional<at::Tensor>& t : arg.toOptionalTensorList()) {
        if (t.has_value()) add(*t);
      }
    }
  }
  if (any_tensor) return check.device();
  for (const auto& arg : args) {
    if (arg.isDevice() && arg.toDevice().type() == c10::DeviceType::PrivateUse1) {
      const auto index = arg.toDevice().has_index() ? arg.toDevice().index() : current_device();
      check_device_index(index);
      return index;
    }
  }
  return current_device();
}

at::Tensor stand_in(const at::Tensor& t, int64_t rank) {
  if (!t.defined() || (t.device().is_cpu() && t.dim() == 0)) return t;
  std::vector<int64_t> sizes(rank < 0 ? t.dim() : rank, 1);
  if (rank < 0) {
    // An empty dimension stays empty: the dry run then meets the errors an
    // empty input gets (a full max of nothing), as the real call would.
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (t.size(d) == 0) sizes[d] = 0;
    }
  }
  return at::zeros(sizes, t.options().device(c10::kCPU));
}

namespace {

// The call's arguments with every tensor (also in tensor lists) replaced by
// replace(tensor), and generators by a private one when `private_generators`.
template <typename Replace>
torch::jit::Stack with_tensors_replaced(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args,
                                        Replace replace, bool private_generators) {
  torch::jit::Stack stack;
  stack.reserve(args.size());
  for (const c10::IValue& arg : args) {
    if (arg.isTensor()) {
      stack.emplace_back(replace(arg.toTensor()));
    } else if (arg.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : arg.toTensorList()) list.push_back(replace(t));
      stack.emplace_back(std::move(list));
    } else if (arg.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> list;
      for (const std::optional<at::Tensor>& t : arg.toOptionalTensorList()) {
        list.push_back(t.has_value() ? std::optional<at::Tensor>(replace(*t)) : std::nullopt);
      }
      stack.emplace_back(std::move(list));
    } else if (private_generators && is_generator_type(op.schema().arguments()[stack.size()].type())) {
      // Random ops draw from a private generator: no user-visible RNG state changes.
      static thread_local at::Generator scratch = cpu_generator_for(OpSeed{});
      stack.emplace_back(scratch);
    } else {
      stack.push_back(arg);
    }
  }
  return stack;
}

}  // namespace

torch::jit::Stack stand_in_stack(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  return with_tensors_replaced(op, args, [](const at::Tensor& t) { return stand_in(t); }, true);
}

torch::jit::Stack meta_stack(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  auto meta = [](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || (t.device().is_cpu() && t.dim() == 0)) return t;
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
  };
  return with_tensors_replaced(op, args, meta, false);
}

namespace {

// Keeps the warnings of a dry run until it is known to pass.
class CollectingWarningHandler final : public c10::WarningHandler {
 public:
  void process(const c10::Warning& warning) override { warnings.push_back(warning); }
  std::vector<c10::Warning> warnings;
};

}  // namespace

bool dry_run_passes(const c10::OperatorHandle& op, torch::jit::Stack& stand_ins, bool keep_warnings) {
  at::AutoDispatchBelowADInplaceOrView no_autograd;
  // The dry run gives the call's warnings, on the caller (the real run is
  // quiet: Note [A boxed kernel warns in its dry run]); a dry run that fails
  // gives none, since the synchronous path then runs the kernel for real.
  CollectingWarningHandler collected;
  {
    c10::WarningUtils::WarningHandlerGuard collect(&collected);
    try {
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stand_ins);
    } catch (const c10::Error&) {
      return false;
    }
  }
  if (keep_warnings) {
    for (const c10::Warning& warning : collected.warnings) c10::warn(warning);
  }
  return true;
}

void normalize_optional_tensor_lists(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  const size_t first = stack->size() - arguments.size();
  for (size_t i = 0; i < arguments.size(); ++i) {
    c10::IValue& value = (*stack)[first + i];
    if (!value.isList() || value.isOptionalTensorList()) continue;
    const auto list_type = arguments[i].type()->cast<c10::ListType>();
    if (!list_type || !list_type->getElementType()->isSubtypeOf(*c10::OptionalType::ofTensor())) continue;
    if (list_type->getElementType()->kind() == c10::TypeKind::TensorType) continue;  // a Tensor[] argument
    c10::List<std::optional<at::Tensor>> optional;
    for (const c10::IValue& element : value.toListRef()) {
      optional.push_back(element.isNone() ? std::nullopt : std::optional<at::Tensor>(element.toTensor()));
    }
    value = std::move(optional);
  }
}

bool is_generator_type(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  return type->kind() == c10::TypeKind::OptionalType &&
         type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

BoxedSnapshot::BoxedSnapshot(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                             c10::DeviceIndex device, LaunchSnapshot& snap) {
  args_.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& value = args[i];
    Arg& arg = args_[i];
    if (value.isTensor()) {
      arg.kind = Kind::kTensor;
      arg.tensor = snap.ref(value.toTensor());
    } else if (value.isTensorList()) {
      arg.kind = Kind::kTensorList;
      const c10::List<at::Tensor> list = value.toTensorList();
      arg.list = snap.refs(at::ITensorListRef(list));
    } else if (value.isOptionalTensorList()) {
      arg.kind = Kind::kOptionalTensorList;
      arg.list = snap.refs(value.toOptionalTensorList());
    } else if (is_generator_type(schema.arguments()[i].type())) {
      arg.kind = Kind::kGenerator;
      std::optional<at::Generator> gen;
      if (value.isGenerator()) gen = value.toGenerator();
      arg.seed = draw_op_seed(gen, device);
    } else {
      arg.value = value;
    }
  }
}

torch::jit::Stack BoxedSnapshot::to_stack() const {
  torch::jit::Stack stack;
  stack.reserve(args_.size());
  for (const Arg& arg : args_) {
    switch (arg.kind) {
      case Kind::kValue: stack.push_back(arg.value); break;
      case Kind::kTensor: stack.push_back(arg.tensor.view()); break;
      case Kind::kTensorList: stack.push_back(c10::List<at::Tensor>(views(arg.list))); break;
      case Kind::kOptionalTensorList: stack.push_back(optional_views(arg.list)); break;
      case Kind::kGenerator: stack.push_back(cpu_generator_for(arg.seed)); break;
    }
  }
  return stack;
}

}  // namespace torch_npu
