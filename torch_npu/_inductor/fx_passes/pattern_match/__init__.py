"""Operators for Inductor's pattern replacements (real torch_npu's names)."""

from .npu_fusion_attention_graph import npu_fusion_attention_graph

__all__ = ["npu_fusion_attention_graph"]
