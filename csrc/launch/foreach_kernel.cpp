// torch._foreach_* on npu: one task per call (Note [One task per foreach call]).
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "csrc/launch/boxed_call.h"
#include "csrc/launch/cpu_allocation_scope.h"
#include "csrc/launch/launch.h"
#include "csrc/launch/npu_empty.h"
#include "csrc/launch/strict_mode.h"

namespace torch_npu {
namespace {

// Note [One task per foreach call]
// torch.optim steps npu parameters with foreach ops (npu is a foreach
// device for it, as CUDA is): an SGD step is one _foreach_add_ over every
// parameter, an Adam step about ten. ATen's kernel for them on any device
// but CUDA loops over the lists, one add_ per tensor, which on npu is one
// launch per tensor: 24 small parameters cost 63 us against cpu's 29 us.
// Where the call cannot fail part-way (below), it is instead one task whose
// stage 2 runs ATen's CPU loop over views of all the tensors. The same
// loop, the same per-tensor kernels, so the results are cpu's.
//
// A call takes that route when every tensor of its first list is an npu
// tensor of one device, of a floating dtype, without internal overlap; every
// other list has the same length and, at each position, a tensor of the
// first list's dtype, sizes and strides on that device that is either that
// tensor or no view of its memory; a single tensor argument (the
// `.Tensor` overloads' scalar) is 0-dim and not complex; and no scalar
// argument is complex or boolean. Then each per-tensor op is an ordinary
// same-dtype, same-shape element-wise op that raises nothing. Any other
// call (mixed dtypes, broadcasting, cpu tensors, empty lists, lengths that
// differ) runs ATen's loop on the caller, launch by launch, which raises
// ATen's own errors.

bool floating(c10::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kDouble;
}

bool plain_scalar(const c10::Scalar& s) { return !s.isComplex() && !s.isBoolean(); }

bool one_task_call(c10::ArrayRef<c10::IValue> args) {
  if (args.empty() || !args[0].isTensorList()) return false;
  const c10::ArrayRef<c10::IValue> self = args[0].toListRef();
  if (self.empty()) return false;
  const c10::Device device = self[0].toTensor().device();
  for (const c10::IValue& v : self) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || t.device() != device || !t.is_privateuseone() || !floating(t.scalar_type()) ||
        !t.is_non_overlapping_and_dense()) {
      return false;
    }
  }
  for (size_t k = 1; k < args.size(); ++k) {
    const c10::IValue& arg = args[k];
    if (arg.isTensorList()) {
      const c10::ArrayRef<c10::IValue> list = arg.toListRef();
      if (list.size() != self.size()) return false;
      for (size_t i = 0; i < list.size(); ++i) {
        const at::Tensor& t = list[i].toTensor();
        const at::Tensor& s = self[i].toTensor();
        if (!t.defined() || t.device() != device || t.scalar_type() != s.scalar_type() || t.sizes() != s.sizes() ||
            t.strides() != s.strides()) {
          return false;
        }
        if (t.is_alias_of(s) && t.data_ptr() != s.data_ptr()) return false;  // a partial overlap ATen refuses
      }
    } else if (arg.isTensor()) {
      const at::Tensor& t = arg.toTensor();
      if (!t.defined() || t.dim() != 0 || t.is_complex() || !(t.device() == device || t.is_cpu())) return false;
    } else if (arg.isScalar()) {
      if (!plain_scalar(arg.toScalar())) return false;
    } else if (arg.isList()) {
      // Scalar[] (a list per position)
      const c10::ArrayRef<c10::IValue> list = arg.toListRef();
      if (list.size() != self.size()) return false;
      for (const c10::IValue& v : list) {
        if (!v.isScalar() || !plain_scalar(v.toScalar())) return false;
      }
    } else if (!arg.isBool() && !arg.isNone()) {
      return false;  // nothing else is expected: take ATen's loop
    }
  }
  return true;
}

void foreach_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/, torch::jit::Stack* stack) {
  StrictOpScope strict_op(op);
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const auto args = torch::jit::last(*stack, num_args);
  if (!one_task_call(args)) {
    // ATen's own loop (the kernel CPU shares with every device but CUDA),
    // whose per-tensor ops dispatch to npu one by one.
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    return;
  }
  const at::Tensor& first = args[0].toListRef()[0].toTensor();
  const c10::DeviceIndex device = first.device().index();
  // The profile names the task as structured kernels are named, without "aten::".
  const std::string& qualified = op.operator_name().name;
  const char* name = qualified.c_str() + (qualified.rfind("aten::", 0) == 0 ? 6 : 0);
  LaunchSnapshot snap;
  if (schema.returns().empty()) {  // in place: writes its first list
    BoxedSnapshot call(schema, args, device, snap);
    launch<true>(device, name, KernelOutputs(args[0].toTensorVector()), snap, [call = std::move(call), op]() {
      torch::jit::Stack cpu_stack = call.to_stack();
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu_stack);
    });
    // ATen's loop bumps each tensor's version after its add_ (or mul_, ...)
    // wrote it, and so refuses an inference tensor outside inference mode
    // after writing it, as this does.
    for (const c10::IValue& v : args[0].toListRef()) v.toTensor().unsafeGetTensorImpl()->bump_version();
    torch::jit::drop(*stack, num_args);
    return;
  }
  // Functional: a result like each tensor of the first list (same dtype,
  // sizes and strides, as ATen's per-tensor op gives for these operands).
  std::vector<at::Tensor> results;
  results.reserve(args[0].toListRef().size());
  for (const c10::IValue& v : args[0].toListRef()) {
    const at::Tensor& t = v.toTensor();
    results.push_back(empty_npu(t.sizes(), t.strides(), t.options(), device));
  }
  BoxedSnapshot call(schema, args, device, snap);
  launch<true>(device, name, KernelOutputs(results), snap,
               [device, call = std::move(call), op, outs = snap.refs(at::ITensorListRef(results))]() {
                 DeviceMemoryScope scratch(device);
                 torch::jit::Stack cpu_stack = call.to_stack();
                 op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu_stack);
                 const c10::List<at::Tensor> computed = cpu_stack[0].toTensorList();
                 for (size_t i = 0; i < outs.size(); ++i) outs[i].view().copy_(computed.get(i));
               });
  torch::jit::drop(*stack, num_args);
  stack->push_back(c10::List<at::Tensor>(std::move(results)));
}

// The element-wise foreach ops, in place and functional, that take this
// route (the `.out` overloads, the reductions _foreach_norm, _foreach_max and
// _foreach_powsum, _foreach_mm, and addcmul/addcdiv's `.Tensor` overloads,
// whose scalars come as a 1-D tensor, keep ATen's loop).
constexpr const char* kUnary[] = {"abs",  "acos",  "asin",  "atan",       "ceil",  "cos",   "cosh",    "erf",
                                  "erfc", "exp",   "expm1", "floor",      "frac",  "lgamma", "log",    "log10",
                                  "log1p", "log2", "neg",   "reciprocal", "round", "rsqrt", "sigmoid", "sign",
                                  "sin",  "sinh",  "sqrt",  "tan",        "tanh",  "trunc"};
constexpr const char* kBinary[] = {
    "add.List",        "add.Scalar",         "add.ScalarList",   "add.Tensor",        "sub.List",
    "sub.Scalar",      "sub.ScalarList",     "mul.List",         "mul.Scalar",        "mul.ScalarList",
    "mul.Tensor",      "div.List",           "div.Scalar",       "div.ScalarList",    "div.Tensor",
    "addcmul.Scalar",  "addcmul.ScalarList", "addcdiv.Scalar",   "addcdiv.ScalarList", "lerp.List",
    "lerp.Scalar",     "lerp.ScalarList",    "clamp_min.List",   "clamp_min.Scalar",  "clamp_min.ScalarList",
    "clamp_max.List",  "clamp_max.Scalar",   "clamp_max.ScalarList", "maximum.List",  "maximum.Scalar",
    "maximum.ScalarList", "minimum.List",    "minimum.Scalar",   "minimum.ScalarList", "pow.List",
    "pow.Scalar",      "pow.ScalarList"};

std::string foreach_name(const std::string& op, bool in_place) {
  const auto dot = op.find('.');
  const std::string base = op.substr(0, dot), overload = dot == std::string::npos ? "" : op.substr(dot);
  return "_foreach_" + base + (in_place ? "_" : "") + overload;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  std::vector<std::string> names{"_foreach_zero_", "_foreach_copy_"};
  for (const char* op : kUnary) {
    names.push_back(foreach_name(op, true));
    names.push_back(foreach_name(op, false));
  }
  for (const char* op : kBinary) {
    names.push_back(foreach_name(op, true));
    names.push_back(foreach_name(op, false));
  }
  for (const std::string& name : names) {
    m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&foreach_kernel>());  // a hand-written route
  }
}

}  // namespace torch_npu
