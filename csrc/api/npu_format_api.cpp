// Storage formats of torch_npu's C++ API (NPUFormat.h), through the npu::
// operators that tag formats (csrc/ops/npu_format.cpp).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>

#include "csrc/core/npu_device.h"
#include "torch_npu/csrc/core/npu/NPUFormat.h"

namespace at_npu {
namespace native {
namespace {

constexpr int64_t kFormatNCHW = 0;
constexpr int64_t kFormatND = 2;
constexpr int64_t kFormatNC1HWC0 = 3;
constexpr int64_t kFormatFractalZ = 4;
constexpr int64_t kFormatFractalNZ = 29;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Elements per 32-byte cube row: 32 for 1-byte types, 16 otherwise (Ascend
// computes fp32 tensors' private formats as fp16 ones).
int64_t cube_c0(const at::Tensor& t) { return t.element_size() == 1 ? 32 : 16; }

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
  const int64_t c0 = cube_c0(self);
  if (format == kFormatFractalNZ) {
    if (sizes.size() == 1) sizes.insert(sizes.begin(), 1);
    if (sizes.empty()) sizes = {1, 1};
    const int64_t m = sizes[sizes.size() - 2];
    const int64_t n = sizes[sizes.size() - 1];
    sizes.resize(sizes.size() - 2);
    for (int64_t dim : {ceil_div(n, c0), ceil_div(m, 16), int64_t{16}, c0}) sizes.push_back(dim);
    return sizes;
  }
  if (format == kFormatNC1HWC0 && sizes.size() == 4) {
    return {sizes[0], ceil_div(sizes[1], c0), sizes[2], sizes[3], c0};
  }
  if (format == kFormatFractalZ && sizes.size() == 4) {
    return {ceil_div(sizes[1], c0) * sizes[2] * sizes[3], ceil_div(sizes[0], 16), 16, c0};
  }
  return sizes;
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

}  // namespace native
}  // namespace at_npu
