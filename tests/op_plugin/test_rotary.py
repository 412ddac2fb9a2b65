"""torch_npu.op_plugin.rotary: npu_rotary_mul (both modes) and its backward against the
formula, and npu_apply_rotary_pos_emb in place."""

import pytest
import torch
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import DEVICES, rnd


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["half", "interleave"])
def test_rotary_mul_and_grad(device, mode):
    x = rnd(2, 4, 3, 8, seed=42).to(device).requires_grad_()
    r1 = rnd(1, 4, 1, 8, seed=43).to(device).requires_grad_()
    r2 = rnd(1, 4, 1, 8, seed=44).to(device).requires_grad_()
    out = torch_npu.npu_rotary_mul(x, r1, r2, rotary_mode=mode)
    xc = x.detach().cpu()
    if mode == "half":
        rot = torch.cat((-xc[..., 4:], xc[..., :4]), -1)
    else:
        rot = torch.stack((-xc[..., 1::2], xc[..., 0::2]), -1).flatten(-2)
    assert_close(out.detach().cpu(), xc * r1.detach().cpu() + rot * r2.detach().cpu())
    g = torch.randn_like(out)
    want = torch.autograd.grad(out, (x, r1, r2), g)
    got = torch_npu.npu_rotary_mul_backward(g, x, r1, r2, mode)
    for a, b in zip(got, want):
        assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_apply_rotary_pos_emb_in_place():
    q, k = rnd(1, 4, 2, 8, seed=45).npu(), rnd(1, 4, 2, 8, seed=46).npu()
    cos, sin = rnd(1, 4, 1, 8, seed=47).npu(), rnd(1, 4, 1, 8, seed=48).npu()
    want_q, want_k = torch_npu.npu_rotary_mul(q, cos, sin), torch_npu.npu_rotary_mul(k, cos, sin)
    rq, rk = torch_npu.npu_apply_rotary_pos_emb(q, k, cos, sin)
    assert rq is q and rk is k
    assert_close(q.cpu(), want_q.cpu())
    assert_close(k.cpu(), want_k.cpu())


def test_interleave_rope_deinterleaves_then_rotates_half():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 64).bfloat16()
    angle = torch.randn(2, 1, 5, 32)
    cos = torch.cat([angle.cos()] * 2, -1).bfloat16()
    sin = torch.cat([angle.sin()] * 2, -1).bfloat16()
    got = torch_npu.npu_interleave_rope(x.npu(), cos.npu(), sin.npu()).cpu()
    # Pair (x[2i], x[2i+1]) is rotated by angle i: it lands at (i, i + 32).
    even, odd = x.float()[..., 0::2], x.float()[..., 1::2]
    c, s = angle.cos(), angle.sin()
    want = torch.cat([even * c - odd * s, odd * c + even * s], -1)
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)
    assert got.dtype == torch.bfloat16
    one = torch_npu.npu_interleave_rope(x.npu(), cos[:, :, :1].npu(), sin[:, :, :1].npu()).cpu()
    assert one.shape == x.shape
    with pytest.raises(RuntimeError, match="last dimension \\(D\\) of x, cos and sin should be 64"):
        torch_npu.npu_interleave_rope(x[..., :32].npu(), cos[..., :32].npu(), sin[..., :32].npu())
