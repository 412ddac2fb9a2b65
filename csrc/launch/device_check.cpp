#include "csrc/launch/device_check.h"

#include <c10/util/Exception.h>

#include "csrc/core/npu_error.h"

namespace torch_npu {

void DeviceCheck::add(const at::Tensor& t) {
  if (!t.defined()) return;
  const c10::Device d = t.device();
  if (d.type() == c10::DeviceType::PrivateUse1) {
    if (device_ < 0) {
      device_ = d.index();
    } else {
      TORCH_CHECK(d.index() == device_,
                  "Expected all tensors to be on the same device, but found at least two devices, npu:",
                  static_cast<int>(device_), " and npu:", static_cast<int>(d.index()), "! (when checking arguments for ",
                  op_, ")");
    }
    return;
  }
  TORCH_CHECK(d.is_cpu() && (t.dim() == 0 || allow_cpu_), "Expected all tensors to be on the same device. ",
              kExpectedNpuTensor, " (found at least two devices, npu and ", d.str(),
              ", when checking arguments for ", op_, ")");
}

void check_output_on_npu(const at::Tensor& out) {
  TORCH_CHECK(!out.defined() || out.device().type() == c10::DeviceType::PrivateUse1, "output with device ",
              out.device(), " doesn't match the desired device NPU", error_suffix(SubModule::kOPS, ErrCode::kParam));
}

c10::DeviceIndex DeviceCheck::device() const {
  TORCH_CHECK(device_ >= 0, op_, ": expected at least one npu tensor argument");
  return device_;
}

}  // namespace torch_npu
