"""torch_npu.op_plugin itself: every operator it exports is in torch.ops.npu and on
torch_npu."""

import torch

import torch_npu


def test_every_exported_op_is_in_torch_ops_npu():
    for name in ["npu_fusion_attention", "npu_rms_norm", "npu_rotary_mul", "npu_swiglu", "npu_geglu",
                 "npu_moe_gating_top_k_softmax", "npu_grouped_matmul", "npu_apply_adam_w"]:
        assert hasattr(torch.ops.npu, name)
        assert callable(getattr(torch_npu, name))
