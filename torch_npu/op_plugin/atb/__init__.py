"""torch_npu's ATB (Ascend Transformer Boost) extension operators."""
