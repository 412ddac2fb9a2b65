#include "csrc/launch/npu_empty.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>

#include <memory>

#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"

namespace torch_npu {

namespace {

// An allocator object per device, so stage 1 allocates on the op's device:
// the device is an argument (allocate_on), not the thread's current device.
class DeviceBoundAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override { return allocate_on(device_, bytes); }
  c10::DeleterFnPtr raw_deleter() const override { return npu_caching_allocator()->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    npu_caching_allocator()->copy_data(dest, src, count);
  }
  c10::DeviceIndex device_ = 0;
};

}  // namespace

c10::Allocator* device_allocator(c10::DeviceIndex device) {
  // Built once (thread-safe static init); read-only afterwards.
  static const auto allocators = [] {
    auto all = std::make_unique<DeviceBoundAllocator[]>(kMaxDevices);
    for (int d = 0; d < kMaxDevices; ++d) all[d].device_ = static_cast<c10::DeviceIndex>(d);
    return all;
  }();
  return &allocators[device];
}

at::Tensor empty_npu(c10::IntArrayRef sizes, c10::IntArrayRef strides,
                     const c10::TensorOptions& options, c10::DeviceIndex device) {
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  const auto dtype = c10::typeMetaToScalarType(options.dtype());
  c10::Allocator* allocator = device_allocator(device);
  if (strides.empty()) {
    return at::detail::empty_generic(sizes, allocator, keys, dtype, options.memory_format_opt());
  }
  return at::detail::empty_strided_generic(sizes, strides, allocator, keys, dtype);
}

}  // namespace torch_npu
