#include "csrc/launch/tensor_ref.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/impl/alloc_cpu.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>

#include "csrc/core/npu_recovery.h"

namespace torch_npu {
namespace {
void snapshot_metadata(const at::Tensor& tensor, c10::SmallVector<int64_t, 8>& dims) {
  const auto sizes = tensor.sizes();
  const auto strides = tensor.strides();
  dims.append(sizes.begin(), sizes.end());
  dims.append(strides.begin(), strides.end());
}

}  // namespace

void check_not_quantized(const at::Tensor& tensor) {
  TORCH_CHECK_NOT_IMPLEMENTED(!c10::isQIntType(tensor.scalar_type()), "quantized tensors (",
                              tensor.scalar_type(), ") are not supported on npu by vNPU: it keeps no quantizer for "
                              "device tensors. Quantize on cpu, or use torch_npu.npu_quantize, which returns "
                              "integer tensors and their scales.");
}

void LaunchSnapshot::note(const at::Tensor& tensor) {
  if (!tensor.defined()) return;
  const bool cpu = tensor.device().is_cpu();
  const uint64_t traits = static_cast<uint64_t>(tensor.scalar_type()) |
                          (static_cast<uint64_t>(cpu) << 8) |
                          (static_cast<uint64_t>(tensor.unsafeGetTensorImpl()->is_wrapped_number()) << 9) |
                          (static_cast<uint64_t>(tensor.dim()) << 10);
  signature_ = mix_launch_signature(signature_, traits);
  if (cpu) return;
  if (C10_UNLIKELY(c10::isQIntType(tensor.scalar_type()))) check_not_quantized(tensor);
  if (C10_UNLIKELY(unsafe_data_checked())) check_npu_tensor_is_safe(tensor);
  work_ = std::max(work_, tensor.numel());
  npu_dtypes_ |= uint64_t{1} << (static_cast<unsigned>(tensor.scalar_type()) & 63);
}

TensorRef LaunchSnapshot::ref(const at::Tensor& tensor) {
  note(tensor);
  return TensorRef(tensor);
}

TensorRef LaunchSnapshot::ref(const std::optional<at::Tensor>& tensor) {
  if (tensor.has_value()) note(*tensor);
  return TensorRef(tensor);
}

TensorRef LaunchSnapshot::read(const at::Tensor& tensor) {
  note(tensor);
  return TensorRef(tensor, /*read_only=*/true);
}

TensorRef LaunchSnapshot::read(const std::optional<at::Tensor>& tensor) {
  if (tensor.has_value()) note(*tensor);
  return TensorRef(tensor, /*read_only=*/true);
}

std::vector<TensorRef> LaunchSnapshot::reads(at::ITensorListRef tensors) {
  for (const at::Tensor& t : tensors) note(t);
  return snapshot(tensors, /*read_only=*/true);
}

std::vector<TensorRef> LaunchSnapshot::reads(const c10::List<std::optional<at::Tensor>>& tensors) {
  for (const std::optional<at::Tensor>& t : tensors) {
    if (t.has_value()) note(*t);
  }
  return snapshot(tensors, /*read_only=*/true);
}

std::vector<TensorRef> LaunchSnapshot::refs(at::ITensorListRef tensors) {
  for (const at::Tensor& t : tensors) note(t);
  return snapshot(tensors);
}

std::vector<TensorRef> LaunchSnapshot::refs(const c10::List<std::optional<at::Tensor>>& tensors) {
  for (const std::optional<at::Tensor>& t : tensors) {
    if (t.has_value()) note(*t);
  }
  return snapshot(tensors);
}

TensorRef LaunchSnapshot::alias_host(const at::Tensor& tensor) {
  note(tensor);
  return TensorRef::alias_host(tensor);
}

TensorRef TensorRef::alias_host(const at::Tensor& tensor) {
  TensorRef ref;
  if (!tensor.defined()) return ref;
  ref.defined_ = true;
  ref.dtype_ = tensor.scalar_type();
  ref.data_ = tensor.numel() == 0 ? nullptr : tensor.data_ptr();
  ref.conj_ = tensor.is_conj();
  ref.neg_ = tensor.is_neg();
  snapshot_metadata(tensor, ref.dims_);
  return ref;
}

namespace {

// CPU memory the profiler is not told of: a task's own copies of its CPU
// arguments are made on the host but freed on the stream worker when the task
// ends, where the profiler (its state is the host thread's) cannot see the
// free. Reported one way only, torch's memory profiler would see the address
// allocated again without a free between ("duplicate outputs" in
// export_memory_timeline); unreported both ways, these internal copies are
// simply not part of the profile.
class UnreportedCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    void* data = c10::alloc_cpu(bytes);
    return {data, data, &c10::free_cpu, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &c10::free_cpu; }
  void copy_data(void* dest, const void* src, std::size_t count) const final { default_copy_data(dest, src, count); }
};

at::Tensor task_owned_copy(const at::Tensor& tensor) {
  static UnreportedCpuAllocator allocator;
  at::Tensor copy = at::detail::empty_generic(tensor.sizes(), &allocator, c10::DispatchKeySet(c10::DispatchKey::CPU),
                                              tensor.scalar_type(), std::nullopt);
  copy.copy_(tensor);
  return copy;
}

}  // namespace

TensorRef::TensorRef(const at::Tensor& tensor, bool read_only) {
  if (!tensor.defined()) return;
  defined_ = true;
  if (tensor.device().is_cpu()) {
    // Copied: the caller may change its CPU tensor before the kernel runs.
    cpu_ = task_owned_copy(tensor);
    // Python scalars arrive as "wrapped number" tensors, which type promotion
    // and TensorIterator treat differently from ordinary 0-dim tensors.
    if (tensor.unsafeGetTensorImpl()->is_wrapped_number()) cpu_.unsafeGetTensorImpl()->set_wrapped_number(true);
    return;
  }
  dtype_ = tensor.scalar_type();
  data_ = read_only ? const_cast<void*>(tensor.const_data_ptr()) : tensor.data_ptr();
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
  at::Tensor view;
  if (data_ == nullptr) {  // no elements
    view = at::empty_strided(sizes, strides, at::TensorOptions().dtype(dtype_).device(c10::kCPU));
  } else {
    // What at::from_blob makes (a CPU tensor over memory it does not own,
    // without a deleter), built directly: from_blob's TensorMaker took a
    // third of a small kernel's stage 2 (three views per add).
    const auto meta = c10::scalarTypeToTypeMeta(dtype_);
    c10::Storage storage(c10::Storage::use_byte_size_t(),
                         at::detail::computeStorageNbytes(sizes, strides, meta.itemsize()),
                         c10::DataPtr(data_, c10::Device(c10::kCPU)), /*allocator=*/nullptr, /*resizable=*/false);
    auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                     meta);
    impl->set_sizes_and_strides(sizes, strides);
    view = at::Tensor(std::move(impl));
  }
  if (conj_) view._set_conj(true);
  if (neg_) view._set_neg(true);
  return view;
}

std::vector<TensorRef> snapshot(at::ITensorListRef tensors, bool read_only) {
  std::vector<TensorRef> refs;
  refs.reserve(tensors.size());
  for (const at::Tensor& t : tensors) refs.emplace_back(t, read_only);
  return refs;
}

std::vector<TensorRef> snapshot(const c10::List<std::optional<at::Tensor>>& tensors, bool read_only) {
  std::vector<TensorRef> refs;
  refs.reserve(tensors.size());
  for (const std::optional<at::Tensor>& t : tensors) refs.emplace_back(t, read_only);
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
