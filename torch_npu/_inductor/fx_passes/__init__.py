"""Graph-level rewrites of real torch_npu's Inductor backend that vNPU has:
``pattern_match.npu_fusion_attention_graph``, the fused attention as an
operator pair Inductor's graphs can hold."""
