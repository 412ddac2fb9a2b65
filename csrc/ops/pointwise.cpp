// Ops that ATen implements without a structured meta function but that
// composite ops use everywhere (where, isnan, flip, arange). Their output
// shape follows from the inputs' shapes (or scalars), so stage 1 needs no
// meta function.
#include "csrc/launch/cpu_allocation_scope.h"
#include "csrc/launch/launch.h"

#include <ATen/Dispatch.h>

#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/RangeUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/arange_cpu_dispatch.h>
#include <ATen/ops/flip_cpu_dispatch.h>
#include <ATen/ops/ne_cpu_dispatch.h>
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
  LaunchSnapshot snap;
  launch(device, "where.self", {out}, snap, [c_ = snap.ref(condition), s_ = snap.ref(self), o_ = snap.ref(other),
                                out_ = snap.ref(out)]() {
    at::Tensor out = out_.view();
    at::cpu::where_out(out, c_.view(), s_.view(), o_.view());
  });
  return out;
}

at::Tensor npu_isnan(const at::Tensor& self) {
  const auto device = common_device("isnan", self);
  at::Tensor out = empty_npu(self.sizes(), {}, self.options().dtype(at::kBool), device);
  LaunchSnapshot snap;
  launch(device, "isnan", {out}, snap, [s_ = snap.ref(self), out_ = snap.ref(out)]() {
    // isnan is self != self; written into `out`, no host temporary.
    at::Tensor out = out_.view();
    const at::Tensor self = s_.view();
    at::cpu::ne_out(out, self, self);
  });
  return out;
}

at::Tensor npu_flip(const at::Tensor& self, at::IntArrayRef dims) {
  const auto device = common_device("flip", self);
  at::dim_list_to_bitset(dims, self.dim());  // wraps and rejects duplicates, with ATen's messages
  at::Tensor out = empty_npu(self.sizes(), {}, self.options().memory_format(self.suggest_memory_format()), device);
  LaunchSnapshot snap;
  launch(device, "flip", {out}, snap, [device, s_ = snap.ref(self), dims = dims.vec(), out_ = snap.ref(out)]() {
    DeviceMemoryScope scratch(device);  // ATen's flip has no out= form
    out_.view().copy_(at::cpu::flip(s_.view(), dims));
  });
  return out;
}

// torch.arange(..., device="npu") lands here (empty + arange.out): the size
// follows from the scalars, computed as ATen does.
at::Tensor& npu_arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out) {
  const auto device = common_device("arange.start_out", out);
  int64_t size = 0;
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "arange_npu", [&] {
    size = at::native::compute_arange_size<scalar_t>(start, end, step);
  });
  at::native::resize_output(out, {size});
  LaunchSnapshot snap;
  launch(device, "arange.start_out", {out}, snap, [start, end, step, out_ = snap.ref(out)]() {
    at::Tensor out = out_.view();
    at::cpu::arange_out(out, start, end, step);
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("flip", TORCH_FN(npu_flip));
  m.impl("arange.start_out", TORCH_FN(npu_arange_out));
  m.impl("where.self", TORCH_FN(npu_where));
  m.impl("isnan", TORCH_FN(npu_isnan));
}

}  // namespace torch_npu
