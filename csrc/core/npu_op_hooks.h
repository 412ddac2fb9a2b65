// The operator hooks of torch_npu's C++ API (at_npu::native::RegisterOpHook*Fn,
// OpHook.h): the four registered callbacks and the OP_HOOK_ENABLE switch.
//
// Two places call them, as in torch_npu: operators, through a RecordFunction
// callback installed while the hooks are on (csrc/api/op_hook.cpp), and the
// hccl process group, which hooks its collectives itself: begin(name) and
// pre(t) for each tensor when a collective is issued, end() when its work is
// waited for (ProcessGroupHCCL's PreHook/PostHook).
#pragma once

#include <string>

#include <ATen/core/Tensor.h>

namespace torch_npu {

using OpHookBeginFn = void (*)(const std::string& op_name);
using OpHookEndFn = void (*)();
using OpHookTensorFn = void (*)(const at::Tensor& tensor);

// Thread-safe; nullptr unregisters.
void set_op_hook_begin(OpHookBeginFn fn);
void set_op_hook_end(OpHookEndFn fn);
void set_op_hook_pre(OpHookTensorFn fn);
void set_op_hook_post(OpHookTensorFn fn);

// torch.npu.set_option({"OP_HOOK_ENABLE": ...}); off by default. One atomic load.
bool op_hooks_enabled();
void set_op_hooks_flag(bool enabled);

// Call the registered callback, if any (whatever the switch says: callers check it).
void op_hook_begin(const std::string& op_name);
void op_hook_end();
void op_hook_pre(const at::Tensor& tensor);
void op_hook_post(const at::Tensor& tensor);

}  // namespace torch_npu
