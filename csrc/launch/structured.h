// Output handling for structured ATen ops (the ones with a TORCH_META_FUNC).
//
// ATen's meta function of a structured op computes output sizes, strides
// and dtype (for TensorIterator ops: broadcasting, type promotion, memory
// layout) and reports them through set_output_*. Subclassing the meta class
// lets stage 1 reuse exactly CPU's shape logic, without meta tensors:
//   - StructuredFunctional allocates fresh npu outputs,
//   - StructuredInplace checks the result fits `self`,
//   - StructuredOut resizes user-given `out=` tensors like CPU does.
// The generated kernels (codegen/gen_structured_kernels.py) use these.
#pragma once

#include <ATen/TensorIterator.h>
#include <ATen/TensorMeta.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided.h>
#include <torch/library.h>

#include <array>
#include <functional>
#include <type_traits>

#include "csrc/launch/dropped_warnings.h"
#include "csrc/launch/launch.h"
#include "csrc/launch/op_route.h"

namespace torch_npu {

void check_inplace_output(const at::Tensor& self, c10::IntArrayRef sizes,
                          const c10::TensorOptions& options);
void resize_out_tensor(const at::Tensor& out, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                       const c10::TensorOptions& options);
// Gives `out` (already sized) the memory format `like` suggests, as the CPU
// kernels of a few ops do to their output themselves (Note [Outputs laid out
// like the input], csrc/codegen/gen_structured_kernels.py).
void restride_like(const at::Tensor& out, const at::Tensor& like);

// The pooling backward ops take the indices their forward returned. On an
// Ascend chip those are int32, and torch_npu's kernels accept any integer
// indices; ATen's CPU kernels read int64 only. Integer indices of another
// dtype are widened (an npu copy on the current stream); anything else is
// passed on, for the CPU kernel's own dtype error.
at::Tensor indices_as_int64(const at::Tensor& indices);

// Two npu tensors of one dtype and shape, both contiguous: a binary
// TensorIterator op's output is then a contiguous tensor of that shape and
// dtype (Note [Operands of one dense layout], gen_structured_kernels.py).
bool operands_of_one_dense_layout(const at::Tensor& a, const at::Tensor& b);

// TensorIterator-based meta classes must also see the output through their
// own set_output (it registers the tensor with the iterator); other meta
// classes assert in the base implementation, so only forward for those.
template <typename Meta>
inline void forward_to_iterator(Meta& meta, int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                                const c10::TensorOptions& options) {
  if constexpr (std::is_base_of_v<at::TensorIteratorBase, Meta>) {
    meta.Meta::set_output_raw_strided(i, sizes, strides, options);
  }
}

template <typename Meta, size_t N>
struct StructuredFunctional final : public Meta {
  explicit StructuredFunctional(c10::DeviceIndex device) : device_(device) {}

  void set_output_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                          c10::TensorOptions options) override {
    outputs_[i] = empty_npu(sizes, strides, options, device_);
    forward_to_iterator<Meta>(*this, i, sizes, strides, options);
  }
  void set_output_raw_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    outputs_[i] = empty_npu(sizes, strides, options, device_);
    forward_to_iterator<Meta>(*this, i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t i) override { return outputs_[i]; }

  c10::DeviceIndex device_;
  std::array<at::Tensor, N> outputs_;
};

template <typename Meta, size_t N>
struct StructuredInplace final : public Meta {
  explicit StructuredInplace(std::array<std::reference_wrapper<const at::Tensor>, N> outputs)
      : outputs_(outputs) {}

  void set_output_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                          c10::TensorOptions options) override {
    check_inplace_output(outputs_[i], sizes, options);
    forward_to_iterator<Meta>(*this, i, sizes, strides, options);
  }
  void set_output_raw_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    check_inplace_output(outputs_[i], sizes, options);
    forward_to_iterator<Meta>(*this, i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t i) override { return outputs_[i]; }

  std::array<std::reference_wrapper<const at::Tensor>, N> outputs_;
};

template <typename Meta, size_t N>
struct StructuredOut final : public Meta {
  explicit StructuredOut(std::array<std::reference_wrapper<const at::Tensor>, N> outputs)
      : outputs_(outputs) {}

  void set_output_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                          c10::TensorOptions options) override {
    resize_out_tensor(outputs_[i], sizes, strides, options);
    forward_to_iterator<Meta>(*this, i, sizes, strides, options);
  }
  void set_output_raw_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    resize_out_tensor(outputs_[i], sizes, strides, options);
    forward_to_iterator<Meta>(*this, i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t i) override { return outputs_[i]; }

  std::array<std::reference_wrapper<const at::Tensor>, N> outputs_;
};

// Registers `kernel` as the PrivateUse1 kernel of `name`.
//
// By runtime function pointer, not TORCH_FN, and out of line: c10's boxing
// wrapper, unboxed call wrapper and schema inference are then instantiated
// once per kernel *signature* instead of once per kernel (the generated
// shards register 656 kernels of ~200 signatures), which takes a third
// off their compile time. A dispatch pays one more indirect call.
// Used by the generated kernels only: it notes their route (op_route.h).
template <typename Kernel>
[[gnu::noinline]] void register_kernel(torch::Library& m, const char* name, Kernel* kernel) {
  m.impl(name, kernel);
  note_op_route(name, OpRoute::kStructured);
}

}  // namespace torch_npu
