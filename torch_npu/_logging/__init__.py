"""torch_npu's log names in torch._logging, and TORCH_NPU_LOGS (see _internal)."""
