// PrivateUse1HooksInterface for npu: the entry points torch's generic code
// calls for an accelerator (availability, generators, pinned memory, ...).
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Storage.h>

#include "csrc/core/npu_hooks.h"

#include <atomic>

#include "csrc/core/host_allocator.h"
#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_generator.h"
#include "csrc/core/npu_stream.h"
#include <vnpu/runtime.h>

namespace torch_npu {
namespace {

struct NpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override { return is_initialized(); }
  void init() const override {
    if (device_count() > 0) mark_initialized();
  }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_current_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const auto old = current_device();
    set_current_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned_host_pointer(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return pinned_host_allocator(); }
  c10::Device getDeviceFromPtr(void* data) const override {
    const int device = vnpu::Runtime::instance().device_of_pointer(data);
    NPU_CHECK(device >= 0, "The pointer does not belong to any NPU device");
    return npu_device(static_cast<c10::DeviceIndex>(device));
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return new_generator(device_index);
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override;
};

}  // namespace

namespace {
std::atomic<StorageResizer> g_storage_resizer{nullptr};
}  // namespace

void set_storage_resizer(StorageResizer resizer) { g_storage_resizer.store(resizer); }

void NpuHooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const {
  StorageResizer resizer = g_storage_resizer.load();
  NPU_CHECK_WITH(Error, ErrCode::kInternal, resizer != nullptr, "npu storage resizing is not registered");
  resizer(storage, new_bytes);
}

void register_hooks() {
  static NpuHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  // Generic code (torch.UntypedStorage(n, device="npu"), deserialisation)
  // looks the allocator up by device type.
  c10::SetAllocator(c10::DeviceType::PrivateUse1, npu_caching_allocator());
}

}  // namespace torch_npu
