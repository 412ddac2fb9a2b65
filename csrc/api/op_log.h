// The `op_plugin` log of TORCH_NPU_LOGS: one line per operator the user calls
// on npu tensors, naming the aclnn operator real torch_npu's op-plugin would
// launch for it, in torch_npu's log layout and through its
// TORCH_NPU_LOGS_FILTER (docs/architecture.md, "Logs").
#pragma once

#include <string>

namespace torch_npu {

// Thread-safe. `level` is the logging level of "torch_npu.op_plugin"
// (10 DEBUG, 20 INFO; anything above INFO turns the log off). `filter` is
// TORCH_NPU_LOGS_FILTER's text ("+kept,-dropped"; empty: no filter). While
// on, a RecordFunction callback writes to stderr; off (the default),
// nothing is installed and operators pay nothing.
void set_op_plugin_log(int level, const std::string& filter);

// The aclnn name op-plugin's convention gives an ATen operator:
// "aten::add" -> "aclnnAdd", "aten::add_" -> "aclnnInplaceAdd",
// "aten::native_layer_norm" -> "aclnnNativeLayerNorm".
std::string aclnn_name_of(const std::string& aten_name);

}  // namespace torch_npu
