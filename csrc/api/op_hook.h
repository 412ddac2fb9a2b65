// Operator hooks of torch_npu's C++ API (OpHook.h): the registered callbacks
// run around every npu operator while they are enabled
// (torch.npu.set_option({"OP_HOOK_ENABLE": "enable"})).
#pragma once

namespace torch_npu {

// Thread-safe. While enabled, a RecordFunction callback calls the hooks for
// each outermost operator that has an npu tensor argument; disabled (the
// default), nothing is installed and operators pay nothing.
void set_op_hooks_enabled(bool enabled);

}  // namespace torch_npu
