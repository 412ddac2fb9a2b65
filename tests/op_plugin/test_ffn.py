"""torch_npu.op_plugin.ffn: npu_ffn against its formula (float, MoE, gated,
weight-only and int8 quantisation) on cpu and npu, npu_prefetch, and bad input."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import DEVICES, gen, rnd


def randint8(*shape, seed=0):
    return torch.randint(-8, 8, shape, generator=gen(seed), dtype=torch.int8)


def ffn_reference(x, w1, w2, act, b1=None, b2=None):
    """activation(x W1 + b1) W2 + b2 in float32, the activation rounded to x's dtype."""
    h = x.float() @ w1.float() + (b1.float() if b1 is not None else 0)
    if act in ("swiglu", "geglu", "reglu"):
        a, b = h.chunk(2, dim=-1)
        h = {"swiglu": F.silu, "geglu": F.gelu, "reglu": F.relu}[act](a) * b
    else:
        h = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu}[act](h)
    h = h.to(x.dtype).float()
    return (h @ w2.float() + (b2.float() if b2 is not None else 0)).to(x.dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("act", ["gelu", "relu", "silu"])
def test_ffn_equals_its_formula(device, dtype, act):
    x, w1, w2 = rnd(2, 3, 16, seed=1, dtype=dtype), rnd(16, 32, seed=2, dtype=dtype), rnd(32, 16, seed=3, dtype=dtype)
    b1, b2 = rnd(32, seed=4, dtype=dtype), rnd(16, seed=5, dtype=dtype)
    got = torch_npu.npu_ffn(x.to(device), w1.to(device), w2.to(device), act, bias1=b1.to(device), bias2=b2.to(device))
    assert got.shape == (2, 3, 16) and got.dtype == dtype and got.device.type == device
    assert_close(got.cpu(), ffn_reference(x, w1, w2, act, b1, b2), rtol=1e-2, atol=1e-2)


def test_fastgelu_is_the_ascend_fast_gelu():
    x, w1, w2 = rnd(4, 8, seed=1, dtype=torch.float16), rnd(8, 8, seed=2, dtype=torch.float16), \
        rnd(8, 8, seed=3, dtype=torch.float16)
    h = torch_npu.npu_fast_gelu(x.float() @ w1.float()).half().float()
    assert_close(torch_npu.npu_ffn(x.npu(), w1.npu(), w2.npu(), "fastgelu").cpu(), (h @ w2.float()).half())


def test_float16_high_precision_keeps_the_activation_in_float32():
    x, w1, w2 = rnd(4, 8, seed=1, dtype=torch.float16), rnd(8, 8, seed=2, dtype=torch.float16), \
        rnd(8, 8, seed=3, dtype=torch.float16)
    want = (F.relu(x.float() @ w1.float()) @ w2.float()).half()
    assert_close(torch_npu.npu_ffn(x.npu(), w1.npu(), w2.npu(), "relu", inner_precise=0).cpu(), want)


def test_swiglu_activates_the_first_half():
    x, w1, w2 = rnd(5, 8, seed=1, dtype=torch.float16), rnd(8, 12, seed=2, dtype=torch.float16), \
        rnd(6, 8, seed=3, dtype=torch.float16)
    got = torch_npu.npu_ffn(x.npu(), w1.npu(), w2.npu(), "swiglu", inner_precise=1)
    assert_close(got.cpu(), ffn_reference(x, w1, w2, "swiglu"), rtol=1e-2, atol=1e-2)


def test_experts_take_their_rows_by_count_or_end_index():
    dtype = torch.bfloat16
    x = rnd(7, 8, seed=1, dtype=dtype)
    w1, w2 = rnd(3, 8, 16, seed=2, dtype=dtype), rnd(3, 16, 8, seed=3, dtype=dtype)
    b1, b2 = rnd(3, 16, seed=4, dtype=dtype), rnd(3, 8, seed=5, dtype=dtype)
    counts = [2, 0, 5]
    want = torch.cat([ffn_reference(x[s:s + c], w1[e], w2[e], "silu", b1[e], b2[e])
                      for e, (s, c) in enumerate(zip([0, 2, 2], counts))])
    args = (x.npu(), w1.npu(), w2.npu(), "silu")
    by_count = torch_npu.npu_ffn(*args, expert_tokens=counts, bias1=b1.npu(), bias2=b2.npu())
    by_end = torch_npu.npu_ffn(*args, expert_tokens_index=[2, 2, 7], bias1=b1.npu(), bias2=b2.npu())
    assert_close(by_count.cpu(), want, rtol=1e-2, atol=1e-2)
    assert torch.equal(by_end.cpu(), by_count.cpu())


def test_weight_only_quantisation_dequantises_each_weight():
    dtype = torch.float16
    x = rnd(4, 16, seed=1, dtype=dtype)
    q1, q2 = randint8(16, 32, seed=2), randint8(32, 16, seed=3)
    s1, s2 = rnd(32, seed=4, lo=0.01, hi=0.05, dtype=dtype), rnd(16, seed=5, lo=0.01, hi=0.05, dtype=dtype)
    o1, o2 = rnd(32, seed=6, dtype=dtype), rnd(16, seed=7, dtype=dtype)
    got = torch_npu.npu_ffn(x.npu(), q1.npu(), q2.npu(), "gelu", antiquant_scale1=s1.npu(), antiquant_scale2=s2.npu(),
                            antiquant_offset1=o1.npu(), antiquant_offset2=o2.npu())
    w1, w2 = (q1.half() + o1) * s1, (q2.half() + o2) * s2
    assert_close(got.cpu(), ffn_reference(x, w1, w2, "gelu"), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("output_dtype", [None, torch.bfloat16])
def test_int8_quantisation_requantises_between_the_matmuls(output_dtype):
    x, q1, q2 = randint8(6, 16, seed=1), randint8(16, 32, seed=2), randint8(32, 16, seed=3)
    b1 = torch.randint(-50, 50, (32,), generator=gen(4), dtype=torch.int32)
    b2 = torch.randint(-50, 50, (16,), generator=gen(5), dtype=torch.int32)
    deq1, deq2 = rnd(32, seed=6, lo=0.001, hi=0.01), rnd(16, seed=7, lo=0.001, hi=0.01)
    scale, offset = torch.tensor([3.0]), torch.tensor([1.0])
    got = torch_npu.npu_ffn(x.npu(), q1.npu(), q2.npu(), "relu", bias1=b1.npu(), bias2=b2.npu(), scale=scale.npu(),
                            offset=offset.npu(), deq_scale1=torch_npu.npu_trans_quant_param(deq1).npu(),
                            deq_scale2=torch_npu.npu_trans_quant_param(deq2).npu(), output_dtype=output_dtype)
    h = F.relu(((x.long() @ q1.long()) + b1).float() * deq1) * 3.0 + 1.0
    h = torch.round(h).clamp(-128, 127).long()
    want = (((h @ q2.long()) + b2).float() * deq2).to(output_dtype or torch.float16)
    assert got.dtype == (output_dtype or torch.float16)
    assert_close(got.cpu(), want)


def test_ffn_shape_under_fake_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(3, 320, dtype=torch.float16, device="npu")
        w1 = torch.empty(320, 640, dtype=torch.float16, device="npu")
        w2 = torch.empty(640, 320, dtype=torch.float16, device="npu")
        out = torch_npu.npu_ffn(x, w1, w2, "gelu", inner_precise=1)
    assert out.shape == (3, 320) and out.dtype == torch.float16


@pytest.mark.parametrize("change, message", [
    (dict(activation="tanh"), "activation should be one of"),
    (dict(w2=rnd(16, 16, dtype=torch.float16)), r"K1 \(8\) should equal N2 \(16\)"),
    (dict(w2=rnd(32, 8, dtype=torch.float16)), r"N1 \(16\) should be K2 \(32\)"),
    (dict(activation="swiglu"), r"N1 \(16\) should be 2 \* K2 \(16\)"),
    (dict(x=rnd(4, 8)), "x should be float16, bfloat16 or int8"),
    (dict(kw=dict(expert_tokens=[2, 2], expert_tokens_index=[2, 4])), "not both"),
    (dict(kw=dict(expert_tokens=[1, 3])), r"weights should be 3-dimensional"),
    (dict(kw=dict(scale=torch.ones(1))), "need int8 x"),
    (dict(kw=dict(antiquant_scale1=torch.ones(16))), "antiquant parameters need int8 weights"),
])
def test_bad_input_is_refused_clearly(change, message):
    args = dict(x=rnd(4, 8, dtype=torch.float16), w1=rnd(8, 16, dtype=torch.float16),
                w2=rnd(16, 8, dtype=torch.float16), activation="relu", kw={})
    args.update(change)
    kw = {k: v.npu() if isinstance(v, torch.Tensor) else v for k, v in args["kw"].items()}
    with pytest.raises(RuntimeError, match=message):
        torch_npu.npu_ffn(args["x"].npu(), args["w1"].npu(), args["w2"].npu(), args["activation"], **kw)


def test_expert_rows_must_add_up():
    x, w1, w2 = rnd(5, 8, dtype=torch.float16), rnd(2, 8, 8, dtype=torch.float16), rnd(2, 8, 8, dtype=torch.float16)
    with pytest.raises(RuntimeError, match=r"experts' tokens \(4\) should add up to the rows of x \(5\)"):
        torch_npu.npu_ffn(x.npu(), w1.npu(), w2.npu(), "relu", expert_tokens=[1, 3])


def test_prefetch_changes_nothing_and_checks_its_range():
    t = torch.arange(8.0).npu()
    assert torch_npu.npu_prefetch(t, None, 1 << 20) is None
    assert torch.equal(t.cpu(), torch.arange(8.0))
    with pytest.raises(RuntimeError, match="The max_size should be greater than zero, but got 0."):
        torch_npu.npu_prefetch(t, None, 0)
    with pytest.raises(RuntimeError, match="The offset should be nonnegative, but got -1."):
        torch_npu.npu_prefetch(t, None, 16, -1)
    with pytest.raises(RuntimeError, match="offset out of range of tensor size, tensor size: 32, offset: 32"):
        torch_npu.npu_prefetch(t, None, 16, 32)


def test_compiled_graphs_keep_the_prefetch():
    # Its result is unused: without its side-effect mark AOT would drop it.
    from torch._dynamo.backends.common import aot_autograd

    seen = []

    def record(gm, inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes)
        return gm

    def fn(w, x):
        torch_npu.npu_prefetch(w, x, 64)
        return x @ w

    torch._dynamo.reset()
    w, x = rnd(4, 4).npu(), rnd(2, 4).npu()
    assert_close(torch.compile(fn, backend=aot_autograd(fw_compiler=record))(w, x).cpu(), (x @ w).cpu())
    assert "npu.npu_prefetch.default" in seen
