// Storage formats of torch_npu's C++ API (NPUFormat.h), through the npu::
// operators that tag formats (csrc/ops/npu_format.cpp).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_storage_shape.h"
#include "torch_npu/csrc/core/npu/NPUFormat.h"

namespace at_npu {
namespace native {
namespace {

constexpr int64_t kFormatNCHW = 0;
constexpr int64_t kFormatND = 2;
constexpr int64_t kFormatFractalNZ = 29;

}  // namespace

int64_t get_npu_format(const at::Tensor& self) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("npu::get_npu_format", "").typed<int64_t(const at::Tensor&)>();
  return op.call(self);
}

at::Tensor npu_format_cast(const at::Tensor& self, int64_t acl_format) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("npu::npu_format_cast", "")
                       .typed<at::Tensor(const at::Tensor&, int64_t, std::optional<int64_t>, std::optional<int64_t>)>();
  return op.call(self, acl_format, std::nullopt, std::nullopt);
}

std::vector<int64_t> get_npu_storage_sizes(const at::Tensor& self) {
  const int64_t format = get_npu_format(self);
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  // FRACTAL_NZ treats a vector as one row and a scalar as a 1x1 matrix.
  if (format == kFormatFractalNZ && sizes.size() < 2) sizes.insert(sizes.begin(), 2 - sizes.size(), 1);
  return torch_npu::npu_storage_sizes(sizes, format, torch_npu::cube_c0(self.element_size()));
}

at::Tensor empty_with_format(c10::IntArrayRef sizes, const c10::TensorOptions& options, int64_t format,
                             bool keep_format) {
  c10::TensorOptions npu_options = options;
  if (!options.has_device() || options.device().type() != c10::DeviceType::PrivateUse1) {
    npu_options = options.device(c10::Device(c10::DeviceType::PrivateUse1, torch_npu::current_device()));
  }
  at::Tensor out = at::empty(sizes, npu_options);
  const int64_t base = out.dim() == 4 ? kFormatNCHW : kFormatND;
  return format == base ? out : npu_format_cast(out, format);
}

at::Tensor empty_with_swapped_memory(c10::IntArrayRef size, c10::optional<at::ScalarType> dtype_opt,
                                     c10::optional<c10::Device> device_opt) {
  // torch_npu.empty_with_swapped_memory (torch_npu/op_plugin/tensor_ops.py),
  // through the dispatcher: its checks and messages are the Python API's.
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("npu::empty_with_swapped_memory", "")
                             .typed<at::Tensor(c10::IntArrayRef, std::optional<at::ScalarType>,
                                               std::optional<c10::Device>)>();
  return op.call(size, dtype_opt, device_opt);
}

}  // namespace native
}  // namespace at_npu
