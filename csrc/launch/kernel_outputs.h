// KernelOutputs: the tensors a launched kernel writes, so that a kernel that
// fails on its stream leaves no stale memory behind (Note [Asynchronous
// errors] in runtime/include/vnpu/stream.h).
//
// When stage 2 throws, the runtime records the error and keeps running later
// tasks; before that, the adaptor poisons the failed kernel's outputs:
// floating and complex outputs become NaN, signed integers their lowest
// value, unsigned integers their highest, bools true. Work that reads them
// computes on an obvious marker (NaN propagates; an index that is the lowest
// int is out of range), never on uninitialised memory that looks valid.
//
// Dense outputs (every fresh output, most out= tensors) are kept as a bare
// span; strided views (out= into a slice) keep a TensorRef so that only
// their own elements are poisoned, never the neighbours in the same storage.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <initializer_list>
#include <memory>
#include <vector>

#include "csrc/launch/tensor_ref.h"

namespace torch_npu {

class KernelOutputs {
 public:
  KernelOutputs() = default;
  KernelOutputs(std::initializer_list<std::reference_wrapper<const at::Tensor>> outputs);
  explicit KernelOutputs(c10::ArrayRef<at::Tensor> outputs);

  // Undefined tensors and tensors with no elements are ignored.
  void add(const at::Tensor& output);

  // Stage 2, on the worker, after the kernel threw. Never throws.
  void poison() const noexcept;

  // Stage 2, after the kernel ran: whether a floating output (float32,
  // float16, bfloat16, float64) holds an inf or a nan (Note [Saturation
  // mode's float status] in csrc/launch/float_status.h).
  bool any_non_finite() const;

 private:
  // Kept small: a KernelOutputs travels inside every queued task, whose
  // callable must fit the slot (vnpu::Task::kInlineBytes) to avoid a heap box.
  struct Span {
    void* data = nullptr;
    int64_t numel = 0;
  };
  static constexpr size_t kInlineSpans = 3;
  std::array<Span, kInlineSpans> spans_{};
  std::array<c10::ScalarType, kInlineSpans> dtypes_{};
  uint8_t num_spans_ = 0;
  std::unique_ptr<std::vector<TensorRef>> others_;  // strided outputs, extra outputs
};

}  // namespace torch_npu
