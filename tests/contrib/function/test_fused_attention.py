"""torch_npu.contrib.function.fused_attention: npu_fused_attention(_with_layernorm) against
attention written out on cpu, with gradients and shape checks."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from torch_npu.contrib import function as cf

from contrib.inputs import NPU, rnd


def ref_fused_attention(x, mask, w, b, scale, batch, seq):
    heads = x.shape[1] // 64
    q, k, v = ((x @ wi + bi).reshape(batch, seq, heads, 64).permute(0, 2, 1, 3) for wi, bi in zip(w, b))
    p = torch.softmax(q @ k.transpose(-2, -1) * scale + mask, -1)
    return (p @ v).permute(0, 2, 1, 3).reshape(batch * seq, -1)


@pytest.mark.parametrize("with_layernorm", [False, True])
def test_npu_fused_attention(with_layernorm):
    batch, seq, hidden = 2, 16, 768
    x = rnd(batch * seq, hidden, seed=1)
    mask = torch.where(rnd(batch, 1, seq, seq, seed=2) > 1.0, -10000.0, 0.0)
    w = [rnd(hidden, hidden, seed=3 + i) / 30 for i in range(3)]
    b = [rnd(hidden, seed=6 + i) for i in range(3)]
    gamma, beta = rnd(hidden, seed=9), rnd(hidden, seed=10)
    dev = [t.to(NPU).requires_grad_() for t in [x] + w + b + [gamma, beta]]
    ref_in = [t.clone().requires_grad_() for t in [x] + w + b + [gamma, beta]]
    if with_layernorm:
        ctx, norm = cf.npu_fused_attention_with_layernorm(dev[0], mask.to(NPU), *dev[1:], scale=0.125)
        rn = F.layer_norm(ref_in[0], (hidden,), ref_in[7], ref_in[8], 1e-5)
        ref = ref_fused_attention(rn, mask, ref_in[1:4], ref_in[4:7], 0.125, batch, seq)
        assert_close(norm.detach().cpu(), rn.detach(), atol=1e-4, rtol=1e-4)
        used = range(9)
    else:
        ctx = cf.npu_fused_attention(dev[0], mask.to(NPU), *dev[1:7], scale=0.125)
        ref = ref_fused_attention(ref_in[0], mask, ref_in[1:4], ref_in[4:7], 0.125, batch, seq)
        used = range(7)
    assert_close(ctx.detach().cpu(), ref.detach(), atol=1e-4, rtol=1e-4)
    g = rnd(*ref.shape, seed=11)
    ctx.backward(g.to(NPU))
    ref.backward(g)
    for i in used:
        assert_close(dev[i].grad.cpu(), ref_in[i].grad, atol=1e-3, rtol=1e-3)


def test_npu_fused_attention_shape_checks():
    w = [torch.zeros(768, 768)] * 3
    b = [torch.zeros(768)] * 3
    with pytest.raises(RuntimeError, match="hidden_states"):
        cf.npu_fused_attention(torch.zeros(30, 768), torch.zeros(2, 1, 15, 15), *w, *b)
    with pytest.raises(RuntimeError, match="hidden_states"):
        cf.npu_fused_attention(torch.zeros(32, 512), torch.zeros(2, 1, 16, 16), *w, *b)
    with pytest.raises(RuntimeError, match="attention_mask"):
        cf.npu_fused_attention(torch.zeros(32, 768), torch.zeros(2, 2, 16, 16), *w, *b)
    with pytest.raises(RuntimeError, match="kernel"):
        cf.npu_fused_attention(torch.zeros(32, 768), torch.zeros(2, 1, 16, 16), torch.zeros(1024, 1024), *w[1:], *b)


def test_check_compatibility_once_wants_the_devices_formats_and_shapes():
    import torch_npu
    from torch_npu.contrib.function.fused_attention import _check_compatibility_once, _is_format_matched

    def t(shape, fmt):
        # Tagged in place: a cast would keep the 1-d tensors ND (torch_npu does).
        return torch_npu.npu_format_cast_(torch.randn(*shape).npu(), fmt)

    good = [t((32, 1024), 29), t((2, 1, 16, 16), 29)] + [t((1024, 1024), 29) for _ in range(3)] + \
        [t((1024,), 2) for _ in range(3)]
    assert _is_format_matched(good)
    _check_compatibility_once(*good)
    with pytest.raises(RuntimeError, match="format not matches"):
        _check_compatibility_once(*good[:5], t((1024,), 29), *good[6:])
    with pytest.raises(RuntimeError, match="gamma or beta format not matches"):
        _check_compatibility_once(*good, gamma=t((1024,), 29), beta=t((1024,), 2))
    with pytest.raises(RuntimeError, match="shape of hidden_states not matches"):
        _check_compatibility_once(t((30, 1024), 29), *good[1:])


def test_error_code_suffix_is_torch_npus():
    import re
    import subprocess
    import sys
    from torch_npu.utils._error_code import ErrCode, dist_error, ops_error, pta_error
    assert (ErrCode.PARAM.code, ErrCode.PARAM.msg) == (1, "invalid parameter")
    def pattern(code, sub, what):
        return (r"^\n\[ERROR\] \d{4}-\d\d-\d\d-\d\d:\d\d:\d\d \(PID:\d+, Device:-?\d+, RankID:-1\) "
                f"ERR{code} {sub} {what}$")
    assert re.match(pattern("00001", "PTA", "invalid parameter"), pta_error(ErrCode.PARAM))
    assert re.match(pattern("01003", "OPS", "invalid value"), ops_error(ErrCode.VALUE))
    assert re.match(pattern("02200", "DIST", "call hccl api failed"), dist_error(ErrCode.HCCL))
    code = "from torch_npu.utils._error_code import ErrCode, pta_error; print(repr(pta_error(ErrCode.PARAM)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "TORCH_NPU_COMPACT_ERROR_OUTPUT": "1"})
    assert out.stdout.strip() == "''", out.stderr[-2000:]
