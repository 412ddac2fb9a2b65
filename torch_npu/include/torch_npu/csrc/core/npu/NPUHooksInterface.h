// The npu device's PrivateUse1 hooks: what torch's generic code calls for an
// accelerator (availability, the current device, generators, pinned memory,
// resizing storages). One instance is registered when torch_npu loads.
#pragma once

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Storage.h>

#include "torch_npu/csrc/aten/NPUGeneratorImpl.h"
#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace c10_npu {

struct C10_NPU_API NPUHooksInterface : public at::PrivateUse1HooksInterface {
  ~NPUHooksInterface() override = default;
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return at_npu::detail::getDefaultNPUGenerator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index = -1) const override {
    return at_npu::detail::createNPUGenerator(device_index);
  }
  bool isBuilt() const override;
  bool isAvailable() const override;
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override;
  void init() const override;
  c10::DeviceIndex deviceCount() const override;
  void setCurrentDevice(c10::DeviceIndex device) const override;
  c10::DeviceIndex getCurrentDevice() const override;
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override;
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override;
  bool isPinnedPtr(const void* data) const override;
  c10::Allocator* getPinnedMemoryAllocator() const override;
  at::Device getDeviceFromPtr(void* data) const override;
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override;
};

struct C10_NPU_API NPUHooksArgs : public at::PrivateUse1HooksArgs {};

// The registered instance.
C10_NPU_API at::PrivateUse1HooksInterface* get_npu_hooks();

}  // namespace c10_npu
