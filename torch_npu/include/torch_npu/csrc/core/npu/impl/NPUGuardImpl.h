// c10_npu::impl::NPUGuardImpl: the device guard implementation the guards
// of NPUGuard.h are built on. It forwards every call to the npu guard that
// torch_npu registered with c10 (device, stream and event handling live
// there), so extensions and torch_npu share one notion of current device
// and stream.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace c10_npu {
namespace impl {

struct NPUGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType static_type = c10::DeviceType::PrivateUse1;

  NPUGuardImpl() : impl_(c10::impl::getDeviceGuardImpl(static_type)) {}
  explicit NPUGuardImpl(c10::DeviceType t) : impl_(c10::impl::getDeviceGuardImpl(t)) {
    TORCH_CHECK(t == static_type, "NPUGuardImpl expects device type npu, got ", t);
  }

  c10::DeviceType type() const override { return static_type; }
  c10::Device exchangeDevice(c10::Device d) const override { return impl_->exchangeDevice(d); }
  c10::Device getDevice() const override { return impl_->getDevice(); }
  void setDevice(c10::Device d) const override { impl_->setDevice(d); }
  void uncheckedSetDevice(c10::Device d) const noexcept override { impl_->uncheckedSetDevice(d); }
  c10::Stream getStream(c10::Device d) const override { return impl_->getStream(d); }
  c10::Stream getDefaultStream(c10::Device d) const override { return impl_->getDefaultStream(d); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool isHighPriority = false) const override {
    return impl_->getStreamFromGlobalPool(d, isHighPriority);
  }
  c10::Stream getNewStream(c10::Device d, int priority = 0) const override { return impl_->getNewStream(d, priority); }
  c10::Stream exchangeStream(c10::Stream s) const override { return impl_->exchangeStream(s); }
  c10::DeviceIndex deviceCount() const noexcept override { return impl_->deviceCount(); }
  void destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept override {
    impl_->destroyEvent(event, device_index);
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    impl_->record(event, stream, device_index, flag);
  }
  void block(void* event, const c10::Stream& stream) const override { impl_->block(event, stream); }
  bool queryEvent(void* event) const override { return impl_->queryEvent(event); }
  bool queryStream(const c10::Stream& stream) const override { return impl_->queryStream(stream); }
  void synchronizeStream(const c10::Stream& stream) const override { impl_->synchronizeStream(stream); }
  void synchronizeEvent(void* event) const override { impl_->synchronizeEvent(event); }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    impl_->synchronizeDevice(device_index);
  }
  double elapsedTime(void* event1, void* event2, const c10::DeviceIndex device_index) const override {
    return impl_->elapsedTime(event1, event2, device_index);
  }
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override {
    impl_->recordDataPtrOnStream(data_ptr, stream);
  }

 private:
  const c10::impl::DeviceGuardImplInterface* impl_;
};

}  // namespace impl
}  // namespace c10_npu
