// custom_ops::add(x, y): the Ascend C kernel of add_custom.asc as a PyTorch
// operator on npu tensors. It picks the tiling and launches the kernel on the
// current NPU stream (ordered with torch's kernels there); a Meta kernel gives
// torch.compile its shapes. The backward is registered from Python
// (torch.library.register_autograd in custom_ops.py): it keeps this file's
// includes narrow, so it compiles in seconds.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include "torch_npu/csrc/core/npu/NPUGuard.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

void add_custom_launch(uint32_t blockDim, void* stream, uint8_t* x, uint8_t* y, uint8_t* z, uint32_t totalLength,
                       uint32_t tileLength);

namespace {

constexpr uint32_t kBlockDim = 8;     // AI cores used
constexpr uint32_t kTileLength = 2048;  // floats per tile: 6 buffers x 8 KiB fit the 192 KiB UB

at::Tensor add_npu(const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK(x.device().is_privateuseone() && y.device() == x.device(), "custom_ops::add expects npu tensors on one device");
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat, "custom_ops::add expects float32");
  TORCH_CHECK(x.sizes() == y.sizes(), "custom_ops::add expects equal shapes");
  TORCH_CHECK(x.numel() % (kBlockDim * kTileLength) == 0, "custom_ops::add expects a multiple of ",
              kBlockDim * kTileLength, " elements, got ", x.numel());
  c10_npu::NPUGuard guard(x.device());
  at::Tensor xc = x.contiguous(), yc = y.contiguous();
  at::Tensor z = at::empty_like(xc);
  add_custom_launch(kBlockDim, c10_npu::getCurrentNPUStream().stream(), static_cast<uint8_t*>(xc.data_ptr()),
                    static_cast<uint8_t*>(yc.data_ptr()), static_cast<uint8_t*>(z.data_ptr()),
                    static_cast<uint32_t>(x.numel()), kTileLength);
  return z;
}

}  // namespace

TORCH_LIBRARY(custom_ops, m) { m.def("add(Tensor x, Tensor y) -> Tensor"); }
TORCH_LIBRARY_IMPL(custom_ops, PrivateUse1, m) { m.impl("add", TORCH_FN(add_npu)); }
TORCH_LIBRARY_IMPL(custom_ops, Meta, m) {
  m.impl("add", [](const at::Tensor& x, const at::Tensor&) { return at::empty_like(x); });
}
