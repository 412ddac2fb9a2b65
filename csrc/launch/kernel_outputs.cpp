#include "csrc/launch/kernel_outputs.h"

#include <ATen/Dispatch_v2.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <limits>

namespace torch_npu {
namespace {

// The marker every element of a failed kernel's output gets.
c10::Scalar poison_value(c10::ScalarType dtype) {
  if (c10::isFloatingType(dtype) || c10::isComplexType(dtype)) {
    return c10::Scalar(std::numeric_limits<double>::quiet_NaN());
  }
  if (dtype == c10::ScalarType::Bool) return c10::Scalar(true);
  c10::Scalar value;
  AT_DISPATCH_V2(dtype, "poison_value", AT_WRAP([&] {
    value = c10::Scalar(std::numeric_limits<scalar_t>::is_signed
                            ? std::numeric_limits<scalar_t>::lowest()
                            : std::numeric_limits<scalar_t>::max());
  }), AT_EXPAND(AT_INTEGRAL_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  return value;
}

bool poisonable(c10::ScalarType dtype) {
  return c10::isFloatingType(dtype) || c10::isComplexType(dtype) || c10::isIntegralType(dtype, true) ||
         c10::isBarebonesUnsignedType(dtype);
}

bool checked_for_overflow(c10::ScalarType dtype) {
  return dtype == c10::kFloat || dtype == c10::kHalf || dtype == c10::kBFloat16 || dtype == c10::kDouble;
}

bool non_finite(const at::Tensor& values) { return !values.isfinite().all().item<bool>(); }

}  // namespace

KernelOutputs::KernelOutputs(std::initializer_list<std::reference_wrapper<const at::Tensor>> outputs) {
  for (const at::Tensor& t : outputs) add(t);
}

KernelOutputs::KernelOutputs(c10::ArrayRef<at::Tensor> outputs) {
  for (const at::Tensor& t : outputs) add(t);
}

void KernelOutputs::add(const at::Tensor& output) {
  if (!output.defined() || output.numel() == 0 || output.device().is_cpu()) return;
  if (!poisonable(output.scalar_type())) return;
  // Dense and non-overlapping: the elements fill [data, data + numel) exactly.
  if (num_spans_ < kInlineSpans && output.is_non_overlapping_and_dense() && !output.is_conj() &&
      !output.is_neg()) {
    dtypes_[num_spans_] = output.scalar_type();
    spans_[num_spans_++] = Span{output.data_ptr(), output.numel()};
    return;
  }
  if (!others_) others_ = std::make_unique<std::vector<TensorRef>>();
  others_->emplace_back(output);
}

void KernelOutputs::poison() const noexcept {
  try {
    c10::impl::ExcludeDispatchKeyGuard no_autograd(c10::autograd_dispatch_keyset_with_ADInplaceOrView);
    const auto cpu = at::TensorOptions().device(c10::kCPU);
    for (uint8_t i = 0; i < num_spans_; ++i) {
      const Span& span = spans_[i];
      at::from_blob(span.data, {span.numel}, cpu.dtype(dtypes_[i])).fill_(poison_value(dtypes_[i]));
    }
    if (others_) {
      for (const TensorRef& ref : *others_) {
        at::Tensor view = ref.view();
        view.fill_(poison_value(view.scalar_type()));
      }
    }
  } catch (...) {
    // Poisoning is best effort on top of the error, which is reported anyway.
  }
}

bool KernelOutputs::any_non_finite() const {
  c10::impl::ExcludeDispatchKeyGuard no_autograd(c10::autograd_dispatch_keyset_with_ADInplaceOrView);
  const auto cpu = at::TensorOptions().device(c10::kCPU);
  for (uint8_t i = 0; i < num_spans_; ++i) {
    if (checked_for_overflow(dtypes_[i]) &&
        non_finite(at::from_blob(spans_[i].data, {spans_[i].numel}, cpu.dtype(dtypes_[i])))) {
      return true;
    }
  }
  if (others_) {
    for (const TensorRef& ref : *others_) {
      at::Tensor view = ref.view();
      if (checked_for_overflow(view.scalar_type()) && non_finite(view)) return true;
    }
  }
  return false;
}

}  // namespace torch_npu
