// Tensor creation and storage management on npu: empty, empty_strided,
// resize_, set_. No task is queued: these only touch metadata and the
// caching allocator (fresh memory is uninitialised, as on real devices).
//
// Under torch.use_deterministic_algorithms(True) with
// torch.utils.deterministic.fill_uninitialized_memory (the default), new
// memory is filled like CUDA does it: NaN for floating and complex dtypes,
// the largest value for integers (a queued fill, in stream order).
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/kaiser_window.h>
#include <c10/core/StorageImpl.h>
#include <torch/library.h>

#include <memory>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_hooks.h"
#include "csrc/launch/launch.h"

namespace torch_npu {

namespace {

bool fill_uninitialized_memory() {
  const auto& context = at::globalContext();
  return context.deterministicAlgorithms() && context.deterministicFillUninitializedMemory();
}

at::Tensor filled_if_deterministic(at::Tensor fresh) {
  if (C10_UNLIKELY(fill_uninitialized_memory())) at::native::fill_empty_deterministic_(fresh);
  return fresh;
}

c10::DeviceIndex device_from(std::optional<c10::Device> device) {
  const c10::DeviceIndex index = device.has_value() && device->has_index() ? device->index() : current_device();
  check_device_index(index);
  return index;
}

at::Tensor npu_empty(c10::SymIntArrayRef size, std::optional<at::ScalarType> dtype,
                     std::optional<at::Layout> layout, std::optional<at::Device> device,
                     std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!pin_memory.has_value() || !*pin_memory, "Only dense CPU tensors can be pinned");
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided, "npu tensors must have layout torch.strided, got ",
              *layout);
  const auto index = device_from(device);
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return filled_if_deterministic(at::detail::empty_generic(C10_AS_INTARRAYREF_SLOW(size), device_allocator(index),
                                                           keys, dtype.value_or(at::get_default_dtype_as_scalartype()),
                                                           memory_format));
}

at::Tensor npu_empty_strided(c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                             std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                             std::optional<at::Device> device, std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.has_value() || !*pin_memory, "Only dense CPU tensors can be pinned");
  const auto index = device_from(device);
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return filled_if_deterministic(at::detail::empty_strided_generic(
      C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride), device_allocator(index), keys,
      dtype.value_or(at::get_default_dtype_as_scalartype())));
}

// kaiser_window's composite kernel fills through a DispatchStub that only
// CPU and CUDA provide: compute it on the host, then copy it over.
at::Tensor npu_kaiser_window(int64_t window_length, bool periodic, double beta, std::optional<at::ScalarType> dtype,
                             std::optional<at::Layout> layout, std::optional<at::Device> device,
                             std::optional<bool> pin_memory) {
  const at::Tensor host = at::kaiser_window(window_length, periodic, beta, dtype, layout, c10::Device(c10::kCPU),
                                            std::nullopt);
  return host.to(npu_device(device_from(device)));
}

// The other overloads call the one above's native function directly, not
// through the dispatcher: each needs the npu kernel too.
at::Tensor npu_kaiser_window_periodic(int64_t window_length, bool periodic, std::optional<at::ScalarType> dtype,
                                      std::optional<at::Layout> layout, std::optional<at::Device> device,
                                      std::optional<bool> pin_memory) {
  return npu_kaiser_window(window_length, periodic, /*beta=*/12.0, dtype, layout, device, pin_memory);
}

at::Tensor npu_kaiser_window_default(int64_t window_length, std::optional<at::ScalarType> dtype,
                                     std::optional<at::Layout> layout, std::optional<at::Device> device,
                                     std::optional<bool> pin_memory) {
  return npu_kaiser_window(window_length, /*periodic=*/true, /*beta=*/12.0, dtype, layout, device, pin_memory);
}

const at::Tensor& npu_resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                              std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  const auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  for (auto s : sizes) TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", sizes);
  if (impl->sizes() != sizes) {
    impl->set_sizes_contiguous(sizes);
    const size_t needed = at::detail::computeStorageNbytesContiguous(sizes, self.dtype().itemsize(),
                                                                     self.storage_offset());
    const size_t old_nbytes = self.storage().nbytes();
    if (impl->numel() > 0 && needed > old_nbytes) {
      resize_storage_bytes(self.storage(), needed);
      if (C10_UNLIKELY(fill_uninitialized_memory())) {
        at::native::fill_resize_deterministic_(self, static_cast<int64_t>(old_nbytes));
      }
    }
  }
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != at::MemoryFormat::Preserve, "Unsupported memory format ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& npu_set_storage(at::Tensor& self, at::Storage source, c10::SymInt storage_offset,
                            c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  TORCH_CHECK(source.device() == self.device(), "Attempted to set the storage of a tensor on device \"",
              self.device(), "\" to a storage on different device \"", source.device(),
              "\".  This is no longer allowed; the devices must match.");
  const int64_t offset = storage_offset.expect_int();
  const auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  const auto strides = C10_AS_INTARRAYREF_SLOW(stride);
  at::native::checkSetStorage(self, source, offset, sizes, strides);
  auto* impl = self.unsafeGetTensorImpl();
  if (!impl->storage().is_alias_of(source)) impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(offset);
  if (strides.data() != nullptr) {
    impl->set_sizes_and_strides(sizes, strides);
  } else {
    impl->set_sizes_contiguous(sizes);
  }
  at::native::checkInBoundsForStorage(sizes, strides.data() ? strides : c10::contiguous_strides(sizes),
                                      offset, self.dtype(), self.storage());
  return self;
}

at::Tensor& npu_set_source_storage(at::Tensor& self, at::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  const c10::SymInt sizes[] = {c10::SymInt(numel)};
  return npu_set_storage(self, std::move(source), 0, sizes, {});
}

at::Tensor& npu_set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) return self;
  return npu_set_storage(self, source.storage(), source.sym_storage_offset(), source.sym_sizes(),
                         source.sym_strides());
}

at::Tensor& npu_set_empty(at::Tensor& self) {
  const c10::DeviceIndex index = self.device().index();
  at::Storage storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), 0,
                                                             device_allocator(index), /*resizable=*/true));
  const c10::SymInt sizes[] = {c10::SymInt(0)};
  return npu_set_storage(self, std::move(storage), 0, sizes, {});
}

}  // namespace

void resize_storage_bytes(const c10::Storage& storage, size_t new_bytes) {
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  const c10::DeviceIndex device = storage.device().index();
  c10::DataPtr fresh = device_allocator(device)->allocate(new_bytes);
  const size_t old_bytes = storage.nbytes();
  const size_t copy_bytes = std::min(old_bytes, new_bytes);
  auto* impl = storage.unsafeGetStorageImpl();
  if (copy_bytes > 0) {
    // The old block may still be written by queued work: copy in stream
    // order, and keep the old block alive until the copy ran.
    auto old = std::make_shared<c10::DataPtr>(impl->set_data_ptr(std::move(fresh)));
    void* dst = impl->mutable_data();
    LaunchSnapshot snap;
    launch(device, "resize_", {}, snap, [old, dst, copy_bytes]() { std::memcpy(dst, old->get(), copy_bytes); });
  } else {
    impl->set_data_ptr_noswap(std::move(fresh));
  }
  impl->set_nbytes(new_bytes);
}

// Storage.resize_() reaches the ops layer through the hooks (core).
[[maybe_unused]] const bool g_storage_resizer_registered = (set_storage_resizer(&resize_storage_bytes), true);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(npu_empty));
  m.impl("empty_strided", TORCH_FN(npu_empty_strided));
  m.impl("resize_", TORCH_FN(npu_resize_));
  m.impl("kaiser_window.beta", TORCH_FN(npu_kaiser_window));
  m.impl("kaiser_window.periodic", TORCH_FN(npu_kaiser_window_periodic));
  m.impl("kaiser_window", TORCH_FN(npu_kaiser_window_default));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(npu_set_storage));
  m.impl("set_.source_Storage", TORCH_FN(npu_set_source_storage));
  m.impl("set_.source_Tensor", TORCH_FN(npu_set_source_tensor));
  m.impl("set_", TORCH_FN(npu_set_empty));
}

}  // namespace torch_npu
