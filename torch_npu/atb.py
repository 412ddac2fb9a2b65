"""torch_npu.atb: the ATB (Ascend Transformer Boost) operators' namespace.

Real torch_npu creates this module when op-plugin loads and fills it from the
NNAL package's ``libatb``: paged-cache loads, multi-head latent attention,
ring MLA, the MLA pre-processing chain and DeepSeek's fused top-k routing.
When NNAL is not installed real torch_npu still has every name, and each call
fails saying the package is missing. vNPU is in that position: it has no ATB
library and does not yet compute these operators in plain PyTorch, so each
name here raises a RuntimeError that names it. (The ATB operator real
torch_npu puts at the top level that vNPU does compute,
``torch_npu._npu_matmul_add_fp32``, is in torch_npu/op_plugin/atb.)
"""

__all__ = [
    "npu_paged_cache_load", "npu_multi_head_latent_attention", "_npu_multi_head_latent_attention_get_workspace",
    "_npu_paged_attention_v2", "_npu_paged_attention_v2_get_workspace", "_npu_flash_attention_v2",
    "_npu_flash_attention_prefix_v2", "npu_fused_add_topk_div", "npu_ring_mla", "npu_self_attention_prefix_encoder",
    "npu_mla_preprocess",
]


def _not_supported(name):
    def operator(*args, **kwargs):
        raise RuntimeError(
            f"torch_npu.atb.{name} is not supported on vNPU: the ATB operators come from the NNAL package's libatb, "
            "which the virtual NPU does not have, and vNPU has no plain-PyTorch version of this one yet. Use the "
            "op-plugin operator that computes the same (e.g. torch_npu.npu_fused_infer_attention_score for "
            "attention over a paged KV cache) or plain PyTorch.")
    operator.__name__ = operator.__qualname__ = name
    operator.__module__ = __name__
    operator.__doc__ = f"ATB operator {name}: not supported on vNPU (no libatb); calling it raises RuntimeError."
    return operator


globals().update({name: _not_supported(name) for name in __all__})
