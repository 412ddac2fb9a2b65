"""torch_npu.<op>.out(..., out=[a, b]): a multi-output .out overload takes its
out tensors as one list, as vllm-ascend passes them, besides by name."""

from unittest import mock

import pytest
import torch

import torch_npu


def _qkv():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1, 2, 4, 8, generator=g).npu() for _ in range(3)]


def test_fused_infer_attention_out_takes_a_list_of_outputs():
    q, k, v = _qkv()
    attn, lse = torch.empty(1, 2, 4, 8).npu(), torch.empty(1).npu()
    kwargs = dict(num_heads=2, input_layout="BNSD", scale=0.35)
    result = torch_npu.npu_fused_infer_attention_score.out(q, k, v, workspace=None, out=[attn, lse], **kwargs)
    assert result[0] is attn and result[1] is lse
    expected, _ = torch_npu.npu_fused_infer_attention_score(q, k, v, **kwargs)
    torch.testing.assert_close(attn.cpu(), expected.cpu())
    # By name, as torch.ops.npu takes them, still works; so does a tuple.
    by_name = torch.empty_like(attn)
    torch_npu.npu_fused_infer_attention_score.out(q, k, v, attention_out=by_name, softmax_lse=lse, **kwargs)
    torch.testing.assert_close(by_name.cpu(), expected.cpu())
    q16, k16, v16 = q.half(), k.half(), v.half()  # v2 takes float16 / bfloat16
    attn16 = torch.empty_like(q16)
    torch_npu.npu_fused_infer_attention_score_v2.out(q16, k16, v16, num_query_heads=2, input_layout="BNSD",
                                                     softmax_scale=0.35, out=(attn16, lse))
    expected16, _ = torch_npu.npu_fused_infer_attention_score_v2(q16, k16, v16, num_query_heads=2,
                                                                 input_layout="BNSD", softmax_scale=0.35)
    torch.testing.assert_close(attn16.cpu(), expected16.cpu())


def test_the_exported_op_is_still_the_packet_for_everything_else():
    op = torch_npu.npu_fused_infer_attention_score
    assert op.default is torch.ops.npu.npu_fused_infer_attention_score.default
    assert "out" in op.overloads() and op.__name__ == "npu_fused_infer_attention_score"
    # Ops without a multi-output .out are the packets themselves.
    assert torch_npu.npu_rms_norm is torch.ops.npu.npu_rms_norm


def test_out_can_be_patched_as_vllm_ascend_tests_do():
    with mock.patch("torch_npu.npu_fused_infer_attention_score.out", mock.MagicMock()) as patched:
        torch_npu.npu_fused_infer_attention_score.out(1, out=[2, 3])
    patched.assert_called_once_with(1, out=[2, 3])


def test_a_wrong_out_list_says_what_it_should_hold():
    q, k, v = _qkv()
    attn = torch.empty(1, 2, 4, 8).npu()
    with pytest.raises(TypeError, match=r"out should hold 2 tensors \(attention_out, softmax_lse\), got 1"):
        torch_npu.npu_fused_infer_attention_score.out(q, k, v, num_heads=2, input_layout="BNSD", out=[attn])
    with pytest.raises(TypeError, match="got out= and attention_out= both"):
        torch_npu.npu_fused_infer_attention_score.out(q, k, v, num_heads=2, input_layout="BNSD",
                                                      attention_out=attn, out=[attn, attn])
