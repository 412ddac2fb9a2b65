// at_npu::native::npu_dropout_gen_mask (NPUNativeFunctions.h): torch_npu's
// packed dropout mask for extensions, the operator torch.ops.npu.
// _npu_dropout_gen_mask.Tensor (torch_npu/op_plugin/backward.py) reached
// through the dispatcher.
#include <ATen/core/dispatch/Dispatcher.h>

#include "torch_npu/csrc/aten/NPUNativeFunctions.h"

namespace at_npu {
namespace native {

at::Tensor npu_dropout_gen_mask(const at::Tensor& self, at::IntArrayRef size, double p, int64_t seed, int64_t offset,
                                std::optional<bool> parallel, std::optional<bool> sync) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("npu::_npu_dropout_gen_mask", "Tensor")
                             .typed<at::Tensor(const at::Tensor&, at::IntArrayRef, double, int64_t, int64_t,
                                               std::optional<bool>, std::optional<bool>)>();
  return op.call(self, size, p, seed, offset, parallel, sync);
}

}  // namespace native
}  // namespace at_npu
