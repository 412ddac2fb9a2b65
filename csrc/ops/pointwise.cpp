// Element-wise ops that ATen implements without a structured meta function
// but that composite ops use everywhere (where, isnan). Their output shape is
// the broadcast of the inputs, so stage 1 needs no meta function.
#include "csrc/ops/launch.h"

#include <ATen/ExpandUtils.h>
#include <ATen/ops/isnan_cpu_dispatch.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/where_cpu_dispatch.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

at::Tensor npu_where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const auto device = common_device("where.self", condition, self, other);
  TORCH_CHECK(condition.scalar_type() == at::kByte || condition.scalar_type() == at::kBool,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              condition.scalar_type());
  const auto shape = at::infer_size(condition.sizes(), at::infer_size(self.sizes(), other.sizes()));
  const auto dtype = at::result_type(self, other);
  at::Tensor out = empty_npu(shape, {}, self.options().dtype(dtype), device);
  launch(device, "where.self", [c_ = TensorRef(condition), s_ = TensorRef(self), o_ = TensorRef(other),
                                out_ = TensorRef(out)]() {
    at::Tensor out = out_.view();
    at::cpu::where_out(out, c_.view(), s_.view(), o_.view());
  });
  return out;
}

at::Tensor npu_isnan(const at::Tensor& self) {
  const auto device = common_device("isnan", self);
  at::Tensor out = empty_npu(self.sizes(), {}, self.options().dtype(at::kBool), device);
  launch(device, "isnan", [s_ = TensorRef(self), out_ = TensorRef(out)]() {
    out_.view().copy_(at::cpu::isnan(s_.view()));
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("where.self", TORCH_FN(npu_where));
  m.impl("isnan", TORCH_FN(npu_isnan));
}

}  // namespace torch_npu
