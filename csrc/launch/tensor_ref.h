// TensorRef: what a queued kernel knows about one tensor argument.
//
// Stage 1 (the caller) snapshots a tensor's data pointer, sizes, strides and
// dtype; stage 2 (the stream worker) turns the snapshot into a CPU tensor
// that aliases the device memory (zero copy) and hands it to ATen's CPU
// kernel. Snapshotting, instead of holding the at::Tensor, keeps later
// metadata changes on the caller (resize_, unsqueeze_, .data = ...) from
// leaking into queued work, and keeps refcount traffic off the hot path.
// Memory stays valid by stream order (see npu_caching_allocator.h).
//
// CPU tensors (0-dim scalars mixed into npu ops) are cloned at snapshot time
// so later in-place changes on the host cannot race with the queued kernel.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <optional>
#include <vector>

namespace torch_npu {

class TensorRef {
 public:
  TensorRef() = default;
  // `read_only`: the kernel only reads the tensor (its schema does not
  // mutate it). Its data pointer is then taken without materializing a
  // copy-on-write tensor (a `_lazy_clone`), as ATen's kernels read inputs
  // through const_data_ptr(); a tensor the kernel writes is materialized.
  explicit TensorRef(const at::Tensor& tensor, bool read_only = false);
  explicit TensorRef(const std::optional<at::Tensor>& tensor, bool read_only = false)
      : TensorRef(tensor.has_value() ? *tensor : at::Tensor(), read_only) {}

  // A CPU tensor's memory, aliased rather than cloned. Only for host memory
  // that provably outlives the task: pinned memory whose use is recorded on
  // the stream (host_allocator.h), or a tensor the caller waits for.
  static TensorRef alias_host(const at::Tensor& tensor);

  bool defined() const { return defined_; }

  // Stage 2: a CPU tensor over the same memory (undefined if not defined()).
  at::Tensor view() const;
  std::optional<at::Tensor> optional_view() const {
    return defined_ ? std::optional<at::Tensor>(view()) : std::nullopt;
  }

 private:
  void* data_ = nullptr;
  at::Tensor cpu_;                       // set for CPU arguments
  c10::SmallVector<int64_t, 8> dims_;    // sizes then strides (4 dims inline: tasks stay small)
  c10::ScalarType dtype_ = c10::ScalarType::Undefined;
  bool defined_ = false;
  bool conj_ = false;  // lazy conjugate / negative bits travel with the view
  bool neg_ = false;
};

// What one launch's tensor arguments say about it (see launch()): how much
// work it is, its signature and the dtypes of its npu tensors. Stage 1 makes
// one per launch, snapshots the arguments through it and passes it to
// launch(), so nothing travels between a kernel and its launch in
// thread-local state:
//   LaunchSnapshot snap;
//   launch(device, "relu", {out}, snap, [self_ = snap.ref(self), out_ = snap.ref(out)]() {...});
// (launch() reads it after all its arguments, the lambda's captures
// included, were evaluated.)
class LaunchSnapshot {
 public:
  // TensorRefs of these tensors, noted.
  TensorRef ref(const at::Tensor& tensor);
  TensorRef ref(const std::optional<at::Tensor>& tensor);
  std::vector<TensorRef> refs(at::ITensorListRef tensors);
  std::vector<TensorRef> refs(const c10::List<std::optional<at::Tensor>>& tensors);
  // The same, for arguments the kernel only reads (TensorRef's `read_only`).
  TensorRef read(const at::Tensor& tensor);
  TensorRef read(const std::optional<at::Tensor>& tensor);
  std::vector<TensorRef> reads(at::ITensorListRef tensors);
  std::vector<TensorRef> reads(const c10::List<std::optional<at::Tensor>>& tensors);
  // TensorRef::alias_host, noted.
  TensorRef alias_host(const at::Tensor& tensor);
  // Notes a tensor the kernel reaches another way (undefined: nothing).
  void note(const at::Tensor& tensor);

  // Elements of the largest npu tensor; for a matrix product, scaled by its
  // contraction length (note_contraction): Note [The work of a GEMM].
  int64_t work() const { return contraction_ > kGemmMacsPerElement ? work_ / kGemmMacsPerElement * contraction_ : work_; }
  // A matrix product over `k` (mat1's columns): its cost grows with k.
  void note_contraction(int64_t k) { contraction_ = k; }
  uint64_t signature() const { return signature_; }  // dtype, rank and device kind of each tensor
  uint64_t npu_dtypes() const { return npu_dtypes_; }  // bit (1 << ScalarType) per npu dtype (strict chip mode)

 private:
  // Note [The work of a GEMM]
  // `work` sizes a kernel for the intra-op thread rule (launch.cpp), in
  // elementwise elements. A GEMM's output element costs k multiply-adds,
  // about one elementwise element per kGemmMacsPerElement of them with
  // vectorised GEMM kernels: a 256x256x256 product then counts as 262144
  // elements, at the bar where the whole machine pays off (measured:
  // benchmarks/README.md), and 64x256x512 as 65536, below it.
  static constexpr int64_t kGemmMacsPerElement = 64;
  int64_t work_ = 0;
  int64_t contraction_ = 0;
  uint64_t signature_ = 0;
  uint64_t npu_dtypes_ = 0;
};

// Quantized tensors (quint8, qint8, qint32, quint4x2, quint2x4) are not
// supported on npu: vNPU has no quantizer for device tensors, and ATen's CPU
// kernels read a quantized tensor's quantizer. Raises NotImplementedError
// naming the dtype; every kernel launch checks its npu operands.
void check_not_quantized(const at::Tensor& tensor);

// Folds `value` into a launch signature.
inline uint64_t mix_launch_signature(uint64_t signature, uint64_t value) noexcept {
  uint64_t x = signature ^ (value + 0x9e3779b97f4a7c15ULL + (signature << 6) + (signature >> 2));
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  return x ^ (x >> 27);
}

// Snapshots of a tensor list (cat, stack, _foreach_*), not noted anywhere.
std::vector<TensorRef> snapshot(at::ITensorListRef tensors, bool read_only = false);
std::vector<TensorRef> snapshot(const c10::List<std::optional<at::Tensor>>& tensors, bool read_only = false);
std::vector<at::Tensor> views(const std::vector<TensorRef>& refs);
c10::List<std::optional<at::Tensor>> optional_views(const std::vector<TensorRef>& refs);

}  // namespace torch_npu
