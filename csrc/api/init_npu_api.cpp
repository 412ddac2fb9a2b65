// torch_npu/csrc/libs/init_npu.h: starting and stopping the NPU from C++.
#include "torch_npu/csrc/libs/init_npu.h"

#include <c10/util/Exception.h>

#include "csrc/api/backend_setup.h"
#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_stream.h"

namespace torch_npu {

void init_npu(const c10::DeviceIndex device_index) {
  // Without Python (a C++ program on libtorch_npu) nothing else sets the backend up.
  set_up_backend(default_non_native_ops());
  set_current_device(device_index);
}

void init_npu(const std::string& device_str) { init_npu(c10::Device(device_str)); }

void init_npu(const at::Device& device) {
  TORCH_CHECK(device.is_privateuseone(), "torch_npu::init_npu expects an npu device, got ", device.str());
  init_npu(device.has_index() ? device.index() : current_device());
}

void finalize_npu() {
  if (!is_initialized()) return;
  for (c10::DeviceIndex device = 0; device < device_count(); ++device) synchronize_device(device);
  empty_cache();
}

}  // namespace torch_npu

namespace torch::npu {

void synchronize(int64_t device_index) {
  torch_npu::synchronize_device(torch_npu::resolve_device_index(device_index));
}

}  // namespace torch::npu

namespace c10::npu {

DeviceIndex current_device() { return torch_npu::current_device(); }

}  // namespace c10::npu
