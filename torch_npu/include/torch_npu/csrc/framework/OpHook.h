// Operator hooks (at_npu::native::RegisterOpHook*Fn): callbacks around every
// npu operator while torch.npu.set_option({"OP_HOOK_ENABLE": "enable"}) is
// on. For each operator called from Python or C++ on npu tensors: begin(name),
// pre(t) for each input tensor, post(t) for each output tensor, end().
// The callbacks run on the calling thread, before the operator's kernel is
// queued (pre) and after (post); they must not call npu operators.
#pragma once

#include <string>

#include <ATen/core/Tensor.h>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace at_npu {
namespace native {

using BeginFn = void (*)(const std::string& op_name);
using EndFn = void (*)();
using PreFn = void (*)(const at::Tensor& at_tensor);
using PostFn = void (*)(const at::Tensor& at_tensor);

TORCH_NPU_API void RegisterOpHookBeginFn(BeginFn fn);
TORCH_NPU_API void RegisterOpHookEndFn(EndFn fn);
TORCH_NPU_API void RegisterOpHookPreFn(PreFn fn);
TORCH_NPU_API void RegisterOpHookPostFn(PostFn fn);

}  // namespace native
}  // namespace at_npu
