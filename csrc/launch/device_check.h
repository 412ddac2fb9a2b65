// The device an op runs on: all npu tensor arguments must agree on one npu
// device; CPU tensors are allowed only as 0-dim scalars (as on CUDA), or of
// any shape for ops declared `device_check: NoCheck`.
#pragma once

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>

#include <optional>

namespace torch_npu {

// Folds one argument after the other into the op's device.
class DeviceCheck {
 public:
  // allow_cpu: CPU tensors of any shape are accepted (ATen ops declared
  // device_check: NoCheck, such as indexing with CPU index tensors).
  explicit DeviceCheck(const char* op, bool allow_cpu = false) : op_(op), allow_cpu_(allow_cpu) {}
  void add(const at::Tensor& t);
  void add(const std::optional<at::Tensor>& t) { if (t.has_value()) add(*t); }
  void add(at::ITensorListRef list) { for (const auto& t : list) add(t); }
  void add(const c10::List<std::optional<at::Tensor>>& list) {
    for (const std::optional<at::Tensor>& t : list) add(t);
  }
  // The npu device all tensors agreed on; throws when there was none.
  c10::DeviceIndex device() const;

 private:
  const char* op_;
  bool allow_cpu_;
  c10::DeviceIndex device_ = -1;
};

// An `out=` argument must be an npu tensor: torch_npu's check
// (OpPreparation::check_tensor), with its words, before any other device check.
void check_output_on_npu(const at::Tensor& out);

template <typename... Args>
c10::DeviceIndex common_device(const char* op, const Args&... args) {
  DeviceCheck check(op);
  (check.add(args), ...);
  return check.device();
}

template <typename... Args>
c10::DeviceIndex common_device_allowing_cpu(const char* op, const Args&... args) {
  DeviceCheck check(op, /*allow_cpu=*/true);
  (check.add(args), ...);
  return check.device();
}

}  // namespace torch_npu
