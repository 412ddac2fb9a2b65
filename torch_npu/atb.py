"""torch_npu.atb: the ATB (Ascend Transformer Boost) operators real torch_npu
puts in this namespace (paged-cache loads, multi-head latent attention, ring
MLA, the MLA pre-processing chain, DeepSeek's fused top-k routing).

Each name is the ``torch.ops.atb`` operator of the same name, which vNPU
computes in plain PyTorch (torch_npu/op_plugin/atb/_atb_ops.py,
docs/fused_ops.md). A multi-output ``.out`` overload also takes its outputs
as ``out=[...]``, as on Ascend.
"""

import torch

import torch_npu.op_plugin  # noqa: F401  (defines torch.ops.atb; op_plugin/atb/_atb_ops.py computes them)
from torch_npu.op_plugin._out_list import with_out_list

__all__ = [
    "npu_paged_cache_load", "npu_multi_head_latent_attention", "npu_fused_add_topk_div", "npu_ring_mla",
    "npu_self_attention_prefix_encoder", "npu_mla_preprocess",
]
# Also here, by name (vllm-ascend calls them so), but private: not in __all__.
_PRIVATE = [
    "_npu_multi_head_latent_attention_get_workspace", "_npu_paged_attention_v2",
    "_npu_paged_attention_v2_get_workspace", "_npu_flash_attention_v2", "_npu_flash_attention_prefix_v2",
]

globals().update({name: with_out_list(getattr(torch.ops.atb, name)) for name in __all__ + _PRIVATE})
