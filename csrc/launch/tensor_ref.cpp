#include "csrc/launch/tensor_ref.h"

#include <ATen/ops/empty_strided.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>

namespace torch_npu {
namespace {
thread_local LaunchSnapshot t_launch;
thread_local uint64_t t_last_npu_dtypes = 0;

void note_tensor(const at::Tensor& tensor, bool cpu) {
  const uint64_t traits = static_cast<uint64_t>(tensor.scalar_type()) |
                          (static_cast<uint64_t>(cpu) << 8) |
                          (static_cast<uint64_t>(tensor.unsafeGetTensorImpl()->is_wrapped_number()) << 9) |
                          (static_cast<uint64_t>(tensor.dim()) << 10);
  t_launch.signature = mix_launch_signature(t_launch.signature, traits);
}

void snapshot_metadata(const at::Tensor& tensor, c10::SmallVector<int64_t, 8>& dims) {
  const auto sizes = tensor.sizes();
  const auto strides = tensor.strides();
  dims.append(sizes.begin(), sizes.end());
  dims.append(strides.begin(), strides.end());
}

}  // namespace

LaunchSnapshot take_launch_snapshot() noexcept {
  const LaunchSnapshot snapshot = t_launch;
  t_last_npu_dtypes = snapshot.npu_dtypes;
  t_launch = LaunchSnapshot{};
  return snapshot;
}

uint64_t last_launch_npu_dtypes() noexcept { return t_last_npu_dtypes; }

TensorRef TensorRef::alias_host(const at::Tensor& tensor) {
  TensorRef ref;
  if (!tensor.defined()) return ref;
  ref.defined_ = true;
  ref.dtype_ = tensor.scalar_type();
  ref.data_ = tensor.numel() == 0 ? nullptr : tensor.data_ptr();
  ref.conj_ = tensor.is_conj();
  ref.neg_ = tensor.is_neg();
  snapshot_metadata(tensor, ref.dims_);
  note_tensor(tensor, /*cpu=*/true);
  return ref;
}

TensorRef::TensorRef(const at::Tensor& tensor) {
  if (!tensor.defined()) return;
  defined_ = true;
  if (tensor.device().is_cpu()) {
    note_tensor(tensor, /*cpu=*/true);
    // Cloned: the caller may change its CPU tensor before the kernel runs.
    cpu_ = tensor.clone();
    // Python scalars arrive as "wrapped number" tensors, which type promotion
    // and TensorIterator treat differently from ordinary 0-dim tensors.
    if (tensor.unsafeGetTensorImpl()->is_wrapped_number()) cpu_.unsafeGetTensorImpl()->set_wrapped_number(true);
    return;
  }
  dtype_ = tensor.scalar_type();
  data_ = tensor.data_ptr();
  t_launch.work = std::max(t_launch.work, tensor.numel());
  t_launch.npu_dtypes |= uint64_t{1} << (static_cast<unsigned>(dtype_) & 63);
  note_tensor(tensor, /*cpu=*/false);
  conj_ = tensor.is_conj();
  neg_ = tensor.is_neg();
  snapshot_metadata(tensor, dims_);
}

at::Tensor TensorRef::view() const {
  if (!defined_) return at::Tensor();
  if (cpu_.defined()) return cpu_;
  const size_t dim = dims_.size() / 2;
  const c10::IntArrayRef sizes(dims_.data(), dim);
  const c10::IntArrayRef strides(dims_.data() + dim, dim);
  const auto options = at::TensorOptions().dtype(dtype_).device(c10::kCPU);
  at::Tensor view = data_ == nullptr ? at::empty_strided(sizes, strides, options)  // no elements
                                     : at::from_blob(data_, sizes, strides, options);
  if (conj_) view._set_conj(true);
  if (neg_) view._set_neg(true);
  return view;
}

std::vector<TensorRef> snapshot(at::ITensorListRef tensors) {
  std::vector<TensorRef> refs;
  refs.reserve(tensors.size());
  for (const at::Tensor& t : tensors) refs.emplace_back(t);
  return refs;
}

std::vector<TensorRef> snapshot(const c10::List<std::optional<at::Tensor>>& tensors) {
  std::vector<TensorRef> refs;
  refs.reserve(tensors.size());
  for (const std::optional<at::Tensor>& t : tensors) refs.emplace_back(t);
  return refs;
}

std::vector<at::Tensor> views(const std::vector<TensorRef>& refs) {
  std::vector<at::Tensor> out;
  out.reserve(refs.size());
  for (const auto& r : refs) out.push_back(r.view());
  return out;
}

c10::List<std::optional<at::Tensor>> optional_views(const std::vector<TensorRef>& refs) {
  c10::List<std::optional<at::Tensor>> out;
  out.reserve(refs.size());
  for (const auto& r : refs) out.push_back(r.optional_view());
  return out;
}

}  // namespace torch_npu
