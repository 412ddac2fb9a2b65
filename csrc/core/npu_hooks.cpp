// PrivateUse1HooksInterface for npu: the entry points torch's generic code
// calls for an accelerator (availability, generators, pinned memory, ...).
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Storage.h>

#include "csrc/core/npu_hooks.h"
#include "torch_npu/csrc/core/npu/NPUHooksInterface.h"

#include <atomic>

#include "csrc/core/host_allocator.h"
#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_generator.h"
#include "csrc/core/npu_stream.h"
#include <vnpu/runtime.h>

namespace c10_npu {

// torch_npu's public hooks type (NPUHooksInterface.h), defined over the
// adaptor's device, generator and allocator functions.
bool NPUHooksInterface::isBuilt() const { return true; }
bool NPUHooksInterface::isAvailable() const { return torch_npu::device_count() > 0; }
bool NPUHooksInterface::hasPrimaryContext(c10::DeviceIndex device_index) const {
  return torch_npu::is_initialized();
}
void NPUHooksInterface::init() const {
  if (torch_npu::device_count() > 0) torch_npu::mark_initialized();
}
c10::DeviceIndex NPUHooksInterface::deviceCount() const { return torch_npu::device_count(); }
void NPUHooksInterface::setCurrentDevice(c10::DeviceIndex device) const { torch_npu::set_current_device(device); }
c10::DeviceIndex NPUHooksInterface::getCurrentDevice() const { return torch_npu::current_device(); }
c10::DeviceIndex NPUHooksInterface::exchangeDevice(c10::DeviceIndex device) const {
  const auto old = torch_npu::current_device();
  torch_npu::set_current_device(device);
  return old;
}
c10::DeviceIndex NPUHooksInterface::maybeExchangeDevice(c10::DeviceIndex device) const {
  return exchangeDevice(device);
}
bool NPUHooksInterface::isPinnedPtr(const void* data) const { return torch_npu::is_pinned_host_pointer(data); }
c10::Allocator* NPUHooksInterface::getPinnedMemoryAllocator() const { return torch_npu::pinned_host_allocator(); }
at::Device NPUHooksInterface::getDeviceFromPtr(void* data) const {
  const int device = vnpu::Runtime::instance().device_of_pointer(data);
  NPU_CHECK(device >= 0, "The pointer does not belong to any NPU device");
  return torch_npu::npu_device(static_cast<c10::DeviceIndex>(device));
}

at::PrivateUse1HooksInterface* get_npu_hooks() {
  static NPUHooksInterface hooks;
  return &hooks;
}

}  // namespace c10_npu

namespace torch_npu {

namespace {
std::atomic<StorageResizer> g_storage_resizer{nullptr};
}  // namespace

void set_storage_resizer(StorageResizer resizer) { g_storage_resizer.store(resizer); }

}  // namespace torch_npu

void c10_npu::NPUHooksInterface::resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const {
  using namespace torch_npu;
  StorageResizer resizer = g_storage_resizer.load();
  NPU_CHECK_WITH(Error, ErrCode::kInternal, resizer != nullptr, "npu storage resizing is not registered");
  resizer(storage, new_bytes);
}

namespace torch_npu {

void register_hooks() {
  at::RegisterPrivateUse1HooksInterface(c10_npu::get_npu_hooks());
  // Generic code (torch.UntypedStorage(n, device="npu"), deserialisation)
  // looks the allocator up by device type.
  c10::SetAllocator(c10::DeviceType::PrivateUse1, npu_caching_allocator());
}

}  // namespace torch_npu
