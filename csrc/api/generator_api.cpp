// The npu generators of torch_npu's C++ API (NPUGeneratorImpl.h).
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_generator.h"
#include "torch_npu/csrc/aten/NPUGeneratorImpl.h"

namespace at_npu {
namespace detail {

const at::Generator& getDefaultNPUGenerator(c10::DeviceIndex device_index) {
  return torch_npu::default_generator(device_index < 0 ? torch_npu::current_device() : device_index);
}

at::Generator createNPUGenerator(c10::DeviceIndex device_index) {
  return torch_npu::new_generator(device_index < 0 ? torch_npu::current_device() : device_index);
}

}  // namespace detail
}  // namespace at_npu
