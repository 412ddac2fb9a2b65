"""FLOP counts for npu's attention kernel (``torch.utils.flop_counter``).

npu's ``scaled_dot_product_attention`` runs ATen's
``_scaled_dot_product_fused_attention_overrideable`` (csrc/ops/attention.cpp),
for which torch's FlopCounterMode has no formula, so it counted 0 FLOPs where
CUDA's flash kernel counts the attention's matmuls. The overrideable operator
and its backward take the flash ones' leading arguments (query, key, value;
grad_out first in the backward), so they get the flash formulas. Registered
when the program imports the flop counter.
"""

from torch_npu._after_import import call_after_import


def _register(flop_counter):
    import torch

    aten = torch.ops.aten
    registry = flop_counter.flop_registry  # FlopCounterMode copies it when created
    for op, flash in ((aten._scaled_dot_product_fused_attention_overrideable,
                       aten._scaled_dot_product_flash_attention),
                      (aten._scaled_dot_product_fused_attention_overrideable_backward,
                       aten._scaled_dot_product_flash_attention_backward)):
        if op not in registry and flash in registry:
            registry[op] = registry[flash]


def install():
    call_after_import("torch.utils.flop_counter", _register)
