// The `op_plugin` log of TORCH_NPU_LOGS: one line per operator the user calls
// on npu tensors, naming the aclnn operator real torch_npu's op-plugin would
// launch for it, in torch_npu's log layout and through its
// TORCH_NPU_LOGS_FILTER (docs/architecture.md, "Logs").
#pragma once

#include <string>

namespace torch_npu {

// Installs the RecordFunction callback that writes the log while the
// "torch_npu.op_plugin" logger is at INFO or DEBUG (vnpu/log.h), and removes
// it otherwise, so that operators pay nothing while the log is off. Called
// whenever the levels change (_LogContext.setLogs). Thread-safe.
void refresh_op_plugin_log();

// The aclnn name op-plugin's convention gives an ATen operator:
// "aten::add" -> "aclnnAdd", "aten::add_" -> "aclnnInplaceAdd",
// "aten::native_layer_norm" -> "aclnnNativeLayerNorm".
std::string aclnn_name_of(const std::string& aten_name);

}  // namespace torch_npu
