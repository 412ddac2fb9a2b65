// aten::repeat_interleave.self_int on npu, with real torch_npu's autograd.
//
// ATen's repeat_interleave.self_int is CompositeImplicitAutograd: autograd
// and DTensor see the views it decomposes into (unsqueeze, expand, flatten),
// whose backward reshapes the gradient, a reshape DTensor refuses on a
// sharded dimension that does not divide evenly. Real torch_npu gives the
// operator a kernel and a derivative of its own (op-plugin's
// derivatives.yaml: `self: repeat_interleave_backward_int(grad, self,
// repeats, dim)`), so autograd records the operator whole and DTensor shards
// it, and its backward, by their own strategies
// (torch_npu/distributed/tensor/_math_rules.py). vNPU does the same: this
// autograd kernel records the operator and calls
// npu::repeat_interleave_backward_int (torch_npu/op_plugin/backward.py) for
// the gradient; below autograd the composite runs as before.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <ATen/ops/repeat_interleave_native.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

at::Tensor repeat_interleave_backward_int(const at::Tensor& grad, const at::Tensor& self, const c10::SymInt& repeats,
                                          std::optional<int64_t> dim) {
  // Defined by torch_npu.op_plugin (Python), which import torch_npu runs before any npu tensor exists.
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("npu::repeat_interleave_backward_int", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymInt,
                                               std::optional<int64_t>)>();
  return op.call(grad, self, repeats, dim);
}

class RepeatInterleaveInt : public torch::autograd::Function<RepeatInterleaveInt> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& self, c10::SymInt repeats,
                            std::optional<int64_t> dim, std::optional<c10::SymInt> output_size) {
    ctx->save_for_backward({self});  // its sizes (and, for DTensor, its placements)
    ctx->saved_data["repeats"] = repeats;
    ctx->saved_data["dim"] = dim.has_value() ? c10::IValue(*dim) : c10::IValue();
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return at::repeat_interleave_symint(self, std::move(repeats), dim, std::move(output_size));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor self = ctx->get_saved_variables()[0];
    const c10::IValue dim = ctx->saved_data["dim"];
    return {repeat_interleave_backward_int(grads[0], self, ctx->saved_data["repeats"].toSymInt(),
                                           dim.isNone() ? std::nullopt : std::optional<int64_t>(dim.toInt())),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor repeat_interleave_self_int_autograd(const at::Tensor& self, c10::SymInt repeats, std::optional<int64_t> dim,
                                               std::optional<c10::SymInt> output_size) {
  // Under a functorch transform (grad, vmap, jvp), which refuses C++ autograd
  // functions, ATen's composite runs here instead: its views differentiate as before.
  // (A transform in progress includes its front-mode key in the thread's dispatch keys.)
  if (c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::FuncTorchDynamicLayerFrontMode)) {
    return at::native::repeat_interleave_symint(self, std::move(repeats), dim, std::move(output_size));
  }
  return RepeatInterleaveInt::apply(self, std::move(repeats), dim, std::move(output_size));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("repeat_interleave.self_int", TORCH_FN(repeat_interleave_self_int_autograd));
}

}  // namespace torch_npu
