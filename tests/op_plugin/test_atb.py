"""torch_npu.op_plugin.atb._atb_ops: NNAL's ATB operators (torch.ops.atb, re-exported as
torch_npu.<name>) on npu against per-sequence / per-token formulas written here on cpu
(softmax(Q K^T * scale) V token by token through the block table, vLLM's rotary, ATB's
quantisation and routing references), npu-vs-cpu equality, op-plugin's schemas, argument
errors, FakeTensor and torch.compile tracing."""

import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import gen, rnd

TOL = {torch.float16: dict(atol=3e-3, rtol=3e-3), torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
       torch.float32: dict(atol=1e-5, rtol=1e-5)}


# ------------------------------------------------------------------ references (plain, float64)

def ref_attention(q, k, v, scale, bias=None, allowed=None):
    """q [S, H, D], k [Sk, Hk, D], v [Sk, Hk, Dv]: head by head softmax(q k^T * scale + bias) v
    over the allowed keys; query head h reads kv head h // (H / Hk)."""
    s, h, _ = q.shape
    hk = k.shape[1]
    out = torch.zeros(s, h, v.shape[2], dtype=torch.float64)
    lse = torch.zeros(h, s, dtype=torch.float64)
    for head in range(h):
        g = head // (h // hk)
        sc = q[:, head].double() @ k[:, g].double().t() * scale
        if bias is not None:
            sc = sc + bias[head if bias.shape[0] > 1 else 0].double()
        if allowed is not None:
            sc = sc.masked_fill(~allowed, float("-inf"))
        for i in range(s):
            row = sc[i]
            if torch.isinf(row).all():
                continue
            p = torch.exp(row - row.max())
            out[i, head] = (p / p.sum()) @ v[:, g].double()
            lse[head, i] = row.max() + torch.log(p.sum())
    return out, lse


def tokens_of(cache, table_row, length):
    """The sequence's keys one token at a time: token j is offset j % bs of block table_row[j // bs]."""
    bs = cache.shape[1]
    return torch.stack([cache[int(table_row[j // bs]), j % bs] for j in range(length)]) if length else \
        cache.new_zeros((0,) + tuple(cache.shape[2:]))


def causal(q_len, k_len):
    return torch.tensor([[j <= k_len - q_len + i for j in range(k_len)] for i in range(q_len)])


def to_nz(cache_nd, c0=16):
    """ND [blocks, bs, heads, d] as the NZ cache [blocks, heads * d / c0, bs, c0]."""
    nb, bs = cache_nd.shape[:2]
    return cache_nd.reshape(nb, bs, -1, c0).permute(0, 2, 1, 3).contiguous()


def paged_inputs(b=3, h=4, hk=2, d=8, dv=8, bs=4, nb=10, lens=(5, 1, 9), dtype=torch.float16, seed=0, width=3):
    q = rnd(b, h, d, seed=seed).to(dtype)
    kc = rnd(nb, bs, hk, d, seed=seed + 1).to(dtype)
    vc = rnd(nb, bs, hk, dv, seed=seed + 2).to(dtype)
    table = torch.randperm(nb, generator=gen(seed + 3))[:b * width].reshape(b, width).to(torch.int32)
    return q, kc, vc, table, torch.tensor(lens, dtype=torch.int32)


def ref_paged(q, kc, vc, table, lens, scale, v_dim=None):
    out = torch.zeros(q.shape[0], q.shape[1], v_dim or vc.shape[-1], dtype=torch.float64)
    for i, length in enumerate(lens.tolist()):
        k = tokens_of(kc, table[i], length)
        v = k[..., :v_dim] if v_dim else tokens_of(vc, table[i], length)
        out[i] = ref_attention(q[i:i + 1], k, v, scale)[0][0]
    return out


def npu(*ts):
    return [t.npu() if isinstance(t, torch.Tensor) else t for t in ts]


# ------------------------------------------------------------------ registration and schemas

OP_PLUGIN_SCHEMAS = [  # op_plugin/ops/atb/*.cpp, verbatim
    "_npu_paged_attention_quant(Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, int num_heads, float scale_value, Tensor block_table, Tensor context_lens, int quant_type, int outdata_type, Tensor k_descale, Tensor v_descale, Tensor(a!) out) -> ()",  # noqa: E501
    "npu_fused_add_topk_div(Tensor x, Tensor add_num, *, Tensor? mapping_num=None, Tensor? mapping_table=None, str? activation_type=None, int group_num=1, int group_topk=1, int n=1, int k=1,  bool is_norm=True, float scale=1, bool enable_expert_mapping=False) -> (Tensor, Tensor)",  # noqa: E501
    "npu_fused_add_topk_div.out(Tensor x, Tensor add_num, *, Tensor? mapping_num=None, Tensor? mapping_table=None, str? activation_type=None, int group_num=1, int group_topk=1, int n=1, int k=1,  bool is_norm=True, float scale=1, bool enable_expert_mapping=False, Tensor(a!) y, Tensor(b!) indices) -> (Tensor(a!), Tensor(b!))",  # noqa: E501
    "_npu_group_topk(Tensor self, int k=0, int group_num=1, int n=1) -> ()",
    "_npu_matmul_add_fp32(Tensor x, Tensor weight, Tensor(a!) C) -> ()",
    "npu_mla_preprocess(Tensor input, Tensor gamma0, Tensor beta0, Tensor wdqkv, Tensor descale0, Tensor gamma1, Tensor beta1, Tensor wuq, Tensor descale1, Tensor gamma2, Tensor cos, Tensor sin, Tensor wuk, Tensor kv_cache, Tensor kv_cache_rope, Tensor slotmapping, *,  Tensor? quant_scale0=None, Tensor? quant_offset0=None, Tensor? bias0=None, Tensor? quant_scale1=None, Tensor? quant_offset1=None, Tensor? bias1=None, Tensor? ctkv_scale=None, Tensor? q_nope_scale=None, str? cache_mode=None, str? quant_mode=None) -> (Tensor, Tensor, Tensor, Tensor)",  # noqa: E501
    "npu_mla_preprocess.out(Tensor input, Tensor gamma0, Tensor beta0, Tensor wdqkv, Tensor descale0, Tensor gamma1, Tensor beta1, Tensor wuq, Tensor descale1, Tensor gamma2, Tensor cos, Tensor sin, Tensor wuk, Tensor kv_cache, Tensor kv_cache_rope, Tensor slotmapping, *,  Tensor? quant_scale0=None, Tensor? quant_offset0=None, Tensor? bias0=None, Tensor? quant_scale1=None, Tensor? quant_offset1=None, Tensor? bias1=None, Tensor? ctkv_scale=None, Tensor? q_nope_scale=None, str? cache_mode=None, str? quant_mode=None, Tensor(a!) q_out0, Tensor(b!) kv_cache_out0, Tensor(c!) q_out1, Tensor(d!) kv_cache_out1) -> (Tensor(a!), Tensor(b!), Tensor(c!), Tensor(d!))",  # noqa: E501
    "npu_multi_head_latent_attention(Tensor q_nope, Tensor q_rope, Tensor ctkv, Tensor k_rope, Tensor block_tables, SymInt[] context_lens, int q_headnum, float qk_scale, int kv_headnum, *, Tensor? mask=None, SymInt[]? qseqlen=None, Tensor? qk_descale=None, Tensor? pv_descale=None, str? mask_type=None, str? calc_type=None, str? cache_mode=None) -> Tensor",  # noqa: E501
    "npu_multi_head_latent_attention.out(Tensor q_nope, Tensor q_rope, Tensor ctkv, Tensor k_rope, Tensor block_tables, SymInt[] context_lens, int q_headnum, float qk_scale, int kv_headnum, *, Tensor? mask=None, SymInt[]? qseqlen=None, Tensor? qk_descale=None, Tensor? pv_descale=None, str? mask_type=None, str? calc_type=None, str? cache_mode=None, Tensor(a!) output) -> Tensor(a!)",  # noqa: E501
    "npu_multi_head_latent_attention.lse(Tensor q_nope, Tensor q_rope, Tensor ctkv, Tensor k_rope, Tensor block_tables, SymInt[] context_lens, int q_headnum, float qk_scale, int kv_headnum, bool return_lse, *, Tensor? mask=None, SymInt[]? qseqlen=None, Tensor? qk_descale=None, Tensor? pv_descale=None, str? mask_type=None, str? calc_type=None, str? cache_mode=None, Tensor? workspace=None) -> (Tensor, Tensor)",  # noqa: E501
    "_npu_multi_head_latent_attention_get_workspace.lse(Tensor q_nope, Tensor q_rope, Tensor ctkv, Tensor k_rope, Tensor block_tables, SymInt[] context_lens, int q_headnum, float qk_scale, int kv_headnum, bool return_lse, *, Tensor? mask=None, SymInt[]? qseqlen=None, Tensor? qk_descale=None, Tensor? pv_descale=None, str? mask_type=None, str? calc_type=None, str? cache_mode=None) -> Tensor",  # noqa: E501
    "npu_multi_head_latent_attention.lse_out(Tensor q_nope, Tensor q_rope, Tensor ctkv, Tensor k_rope, Tensor block_tables, SymInt[] context_lens, int q_headnum, float qk_scale, int kv_headnum, bool return_lse, *, Tensor? mask=None, SymInt[]? qseqlen=None, Tensor? qk_descale=None, Tensor? pv_descale=None, str? mask_type=None, str? calc_type=None, str? cache_mode=None, Tensor? workspace=None, Tensor(a!) output, Tensor(b!) lse) -> (Tensor(a!), Tensor(b!))",  # noqa: E501
    "_npu_paged_attention(Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, int num_heads, float scale_value, Tensor block_table, Tensor context_lens, Tensor(a!) out, *,Tensor? workspace=None) -> ()",  # noqa: E501
    "_npu_paged_attention_get_workspace(Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, int num_heads, float scale_value, Tensor block_table, Tensor context_lens, Tensor(a!) out) -> Tensor",  # noqa: E501
    "_npu_paged_attention_v2.out(Tensor query, Tensor key_cache, Tensor block_table, SymInt[] context_lens, *, Tensor? value_cache=None, Tensor? mask=None, int num_kv_heads=0, int num_heads=0, float scale_value=1.0, int mask_type=0, Tensor? workspace=None, Tensor(a!) out) -> Tensor(a!)",  # noqa: E501
    "_npu_paged_attention_v2_get_workspace(Tensor query, Tensor key_cache, Tensor block_table, SymInt[] context_lens, *, Tensor? value_cache=None, Tensor? mask=None, int num_kv_heads=0, int num_heads=0, float scale_value=1.0, int mask_type=0, Tensor(a!) out) -> Tensor",  # noqa: E501
    "_npu_paged_attention_mla(Tensor query, Tensor key_cache, int num_kv_heads, int num_heads, float scale_value, Tensor block_table, Tensor context_lens, int mla_vheadsize, Tensor(a!) out) -> ()",  # noqa: E501
    "_npu_paged_attention_splitfuse(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_table, Tensor context_lens, Tensor mask, Tensor seq_len, int num_kv_heads, int num_heads, float scale_value, Tensor(a!) out) -> ()",  # noqa: E501
    "_npu_paged_attention_splitfuse_v2(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_table, Tensor context_lens, Tensor mask, Tensor seq_len, int num_kv_heads, int num_heads, float scale_value, *, int ? mask_type = 5, Tensor(a!) out) -> ()",  # noqa: E501
    "npu_paged_cache_load.out(Tensor key_cache, Tensor value_cache, Tensor block_table, Tensor context_lens, *, Tensor? seq_starts=None, bool cumsum=False, Tensor(a!) key, Tensor(b!) value) -> (Tensor(a!), Tensor(b!))",  # noqa: E501
    "npu_paged_cache_load(Tensor key_cache, Tensor value_cache, Tensor block_table, Tensor context_lens, *, Tensor? seq_starts=None, bool cumsum=False) -> (Tensor, Tensor)",  # noqa: E501
    "_npu_quantize_per_tensor(Tensor x, Tensor scale, Tensor zero_point, Tensor(a!) y) -> ()",
    "_npu_quant_rms_norm(Tensor self, Tensor gamma, Tensor beta, Tensor scale, Tensor offset, Tensor(a!) output, float eps=1e-05) -> ()",  # noqa: E501
    "_npu_reshape_and_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, Tensor slot_indices) -> ()",  # noqa: E501
    "_npu_reshape_and_cache_siso(Tensor key, Tensor(a!) key_cache, Tensor slot_indices) -> ()",
    "npu_ring_mla(Tensor q_nope, Tensor q_rope, Tensor k_nope, Tensor k_rope, Tensor value, Tensor mask, Tensor seqlen, int head_num, int kv_head_num, *, Tensor? pre_out=None, Tensor? prev_lse=None, float qk_scale=1, str? kernel_type=None, str? mask_type=None, str? input_layout=None, str? calc_type=None) -> (Tensor, Tensor)",  # noqa: E501
    "npu_ring_mla.out(Tensor q_nope, Tensor q_rope, Tensor k_nope, Tensor k_rope, Tensor value, Tensor mask, Tensor seqlen, int head_num, int kv_head_num, *, Tensor? pre_out=None, Tensor? prev_lse=None, float qk_scale=1, str? kernel_type=None, str? mask_type=None, str? input_layout=None, str? calc_type=None, Tensor(a!) output, Tensor(b!) softmax_lse) -> (Tensor(a!), Tensor(b!))",  # noqa: E501
    "_npu_rotary_embedding(Tensor positions, Tensor(a!) query, Tensor(b!) key, int head_size, Tensor cos_sin_cache, bool is_neox_style) -> ()",  # noqa: E501
    "_npu_flash_attention(Tensor query, Tensor key, Tensor value, Tensor mask, Tensor seq_len, float scale_value, int num_heads, int num_kv_heads, Tensor(a!) out) -> ()",  # noqa: E501
    "_npu_flash_attention_v2.out(Tensor query, Tensor key, Tensor value, SymInt[] seq_len, *, Tensor? mask=None, Tensor? slopes=None, int kernel_type=0, int mask_type=2, float scale_value=1, int num_heads=0, int num_kv_heads=0, Tensor(a!) out) -> Tensor(a!)",  # noqa: E501
    "_npu_flash_attention_v3(Tensor query, Tensor key, Tensor value, Tensor mask, Tensor seq_len, float scale_value, int num_heads, int num_kv_heads, *, int ? mask_type = 3, Tensor(a!) out) -> ()",  # noqa: E501
    "_npu_flash_attention_prefix_v2.out(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_table, Tensor mask, SymInt[] seq_len, SymInt[] context_lens, *, Tensor? slopes=None, int kernel_type=1, int mask_type=3, int num_kv_heads=0, int num_heads=0, float scale_value=1, Tensor(a!) out) -> Tensor(a!)",  # noqa: E501
    "npu_self_attention_prefix_encoder(Tensor query, Tensor key, Tensor value, Tensor block_tables, SymInt[] seqlen, SymInt[] kv_seqlen, int q_headnum, float qk_scale, int kv_headnum,*, Tensor? mask=None, Tensor? slopes=None, str? mask_type=None) -> Tensor",  # noqa: E501
    "npu_self_attention_prefix_encoder.out(Tensor query, Tensor key, Tensor value, Tensor block_tables, SymInt[] seqlen, SymInt[] kv_seqlen, int q_headnum, float qk_scale, int kv_headnum,*, Tensor? mask=None, Tensor? slopes=None, str? mask_type=None, Tensor(a!) output) -> Tensor(a!)",  # noqa: E501
    "_npu_flash_attention_qlens(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_table, Tensor mask, Tensor seq_len, Tensor context_lens, int num_kv_heads, int num_heads, float scale_value, Tensor(a!) out) -> ()",  # noqa: E501
    "_npu_flash_attention_unpad(Tensor query, Tensor key, Tensor value, Tensor seq_len, float scale_value, int num_heads, int num_kv_heads, Tensor(a!) out) -> ()",  # noqa: E501
    "_npu_flash_attention_unpad_v2(Tensor query, Tensor key, Tensor value, Tensor seq_len, float scale_value, int num_heads, int num_kv_heads, *, int ? kernel_type = 0, Tensor(a!) out) -> ()",  # noqa: E501
]


@pytest.mark.parametrize("text", OP_PLUGIN_SCHEMAS, ids=lambda t: t.split("(", 1)[0])
def test_schema_is_op_plugins(text):
    name = text.split("(", 1)[0]
    packet, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.atb, packet), overload or "default")
    assert str(op._schema) == str(torch._C.parse_schema("atb::" + text))


def test_every_atb_op_is_exported():
    packets = {t.split("(", 1)[0].split(".")[0] for t in OP_PLUGIN_SCHEMAS}
    assert len(packets) == 29
    for name in packets:
        exported = getattr(torch_npu, name)
        # the packet itself, or (a multi-output .out: torch_npu.<op>.out(..., out=[...])) its thin wrapper
        assert getattr(exported, "_packet", exported) is getattr(torch.ops.atb, name), name
    # _npu_matmul_add_fp32 lives in the atb namespace only, as in op-plugin
    assert not hasattr(torch.ops.npu, "_npu_matmul_add_fp32")
    from torch_npu.op_plugin.atb._atb_ops import _register_atb_extensions
    assert _register_atb_extensions() is None


# ------------------------------------------------------------------ paged attention (decode)

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_paged_attention_gqa_against_per_sequence_softmax(dtype):
    q, kc, vc, table, lens = paged_inputs(dv=6, dtype=dtype)
    scale = 1 / math.sqrt(8)
    want = ref_paged(q, kc, vc, table, lens, scale)
    outs = {}
    for dev in ("cpu", "npu"):
        qq, kk, vv, tt = (t.to(dev) for t in (q, kc, vc, table))
        out = torch.full((3, 4, 6), 7.0, dtype=dtype, device=dev)
        torch_npu._npu_paged_attention(qq, kk, vv, 2, 4, scale, tt, lens, out)  # context_lens on the host
        outs[dev] = out.cpu()
    assert_close(outs["npu"].double(), want, **TOL[dtype])
    assert torch.equal(outs["npu"], outs["cpu"])


def test_paged_attention_workspace_keywords_and_zero_length():
    q, kc, vc, table, lens = paged_inputs(lens=(0, 3, 12))
    scale = 0.3
    qn, kn, vn, tn, ln = npu(q, kc, vc, table, lens)  # context_lens on the device too
    out = torch.full((3, 4, 8), 5.0, dtype=torch.float16, device="npu")
    ws = torch_npu._npu_paged_attention_get_workspace(query=qn, key_cache=kn, value_cache=vn, num_kv_heads=2,
                                                      num_heads=4, scale_value=scale, block_table=tn,
                                                      context_lens=ln, out=out)
    assert ws.dtype == torch.uint8 and ws.device.type == "npu" and ws.numel() == 3 * 4 * 8 * 4
    torch_npu._npu_paged_attention(query=qn, key_cache=kn, value_cache=vn, num_kv_heads=2, num_heads=4,
                                   scale_value=scale, block_table=tn, context_lens=ln, out=out, workspace=ws)
    want = ref_paged(q, kc, vc, table, lens, scale)
    assert_close(out.cpu().double(), want, **TOL[torch.float16])
    assert torch.equal(out.cpu()[0], torch.zeros(4, 8, dtype=torch.float16))  # no keys: zeros


@pytest.mark.parametrize("tag", [True, False])
def test_paged_attention_nz_cache_310p(tag):
    """310P's cache [blocks, kv_heads * head_dim / 16, block_size, 16], cast to NZ or not."""
    q, kc, vc, table, lens = paged_inputs(h=4, hk=2, d=16, dv=16)
    scale = 0.25
    want = ref_paged(q, kc, vc, table, lens, scale)
    kz, vz = to_nz(kc).npu(), to_nz(vc).npu()
    if tag:
        kz, vz = torch_npu.npu_format_cast(kz, 29), torch_npu.npu_format_cast(vz, 29)
    out = torch.empty(3, 4, 16, dtype=torch.float16, device="npu")
    torch_npu._npu_paged_attention(q.npu(), kz, vz, 2, 4, scale, table.npu(), lens, out)
    assert_close(out.cpu().double(), want, **TOL[torch.float16])


def test_paged_attention_v2_alibi_and_mla():
    q, kc, vc, table, lens = paged_inputs(h=4, hk=1, d=8, dv=8)
    mask = rnd(3, 4, 1, 12, seed=9).to(torch.float16)
    scale = 0.4
    out = torch.empty(3, 4, 8, dtype=torch.float16, device="npu")
    res = torch_npu._npu_paged_attention_v2(q.npu(), kc.npu(), table.npu(), lens.tolist(), value_cache=vc.npu(),
                                            mask=mask.npu(), num_kv_heads=1, num_heads=4, scale_value=scale,
                                            mask_type=2, out=out)
    assert res is out
    want = torch.zeros(3, 4, 8, dtype=torch.float64)
    for i, length in enumerate(lens.tolist()):
        bias = mask[i, :, :, :length].double()  # [H, 1, L]
        want[i] = ref_attention(q[i:i + 1], tokens_of(kc, table[i], length), tokens_of(vc, table[i], length), scale,
                                bias)[0][0]
    assert_close(out.cpu().double(), want, **TOL[torch.float16])
    ws = torch_npu._npu_paged_attention_v2_get_workspace(q.npu(), kc.npu(), table.npu(), lens.tolist(),
                                                         value_cache=vc.npu(), num_kv_heads=1, num_heads=4, out=out)
    assert ws.dtype == torch.uint8
    # MLA: values are the first 6 features of the keys
    out = torch.empty(3, 4, 6, dtype=torch.float16, device="npu")
    torch_npu._npu_paged_attention_mla(q.npu(), kc.npu(), 1, 4, scale, table.npu(), lens, 6, out)
    assert_close(out.cpu().double(), ref_paged(q, kc, None, table, lens, scale, v_dim=6), **TOL[torch.float16])


def test_paged_attention_quant_dequant_fusion_and_online():
    b, h, hk, d, bs, nb = 2, 4, 2, 8, 4, 6
    table = torch.tensor([[3, 1], [0, 5]], dtype=torch.int32)
    lens = torch.tensor([6, 3], dtype=torch.int32)
    kc = torch.randint(-8, 8, (nb, bs, hk, d), generator=gen(1), dtype=torch.int8)
    vc = torch.randint(-8, 8, (nb, bs, hk, d), generator=gen(2), dtype=torch.int8)
    scale = 0.3
    # quant_type 1: float query, K = k * k_descale, V = v * v_descale per channel
    q = rnd(b, h, d, seed=3).to(torch.bfloat16)
    kd, vd = rnd(hk * d, seed=4, lo=0.05, hi=0.2), rnd(hk * d, seed=5, lo=0.05, hi=0.2)
    out = torch.empty(b, h, d, dtype=torch.bfloat16, device="npu")
    torch_npu._npu_paged_attention_quant(q.npu(), kc.npu(), vc.npu(), hk, h, scale, table.npu(), lens, 1, 27,
                                         kd.npu(), vd.npu(), out)
    kf = kc.double() * kd.double().view(hk, d)
    vf = vc.double() * vd.double().view(hk, d)
    assert_close(out.cpu().double(), ref_paged(q, kf, vf, table, lens, scale), **TOL[torch.bfloat16])
    # quant_type 3: int8 q, online softmax quantised to int8 (op-plugin's golden)
    qi = torch.randint(-8, 8, (b, h, d), generator=gen(6), dtype=torch.int8)
    kd, vd = rnd(h, seed=7, lo=0.01, hi=0.05), rnd(h, seed=8, lo=0.01, hi=0.05)
    out = torch.empty(b, h, d, dtype=torch.float16, device="npu")
    torch_npu._npu_paged_attention_quant(qi.npu(), kc.npu(), vc.npu(), hk, h, scale, table.npu(), lens, 3, 1,
                                         kd.npu(), vd.npu(), out)
    want = torch.zeros(b, h, d, dtype=torch.float64)
    for i in range(b):
        k, v = tokens_of(kc, table[i], int(lens[i])), tokens_of(vc, table[i], int(lens[i]))
        for head in range(h):
            g = head // (h // hk)
            s = (qi[i, head].double() @ k[:, g].double().t()).float() * kd[head] * scale
            e = torch.exp(s - s.max())
            p = torch.round((e / torch.tensor(1 / 127.0)).half().float())
            want[i, head] = (p.double() @ v[:, g].double()) * float(vd[head]) / 127 / float(e.sum())
    assert_close(out.cpu().double(), want, **TOL[torch.float16])


# ------------------------------------------------------------------ chunked prefill and packed attention

def splitfuse_case(dtype=torch.float16):
    hk, h, d, bs, nb = 2, 4, 8, 4, 12
    ctx = [7, 5, 9]
    qlens = [3, 1, 9]
    kc = rnd(nb, bs, hk, d, seed=11).to(dtype)
    vc = rnd(nb, bs, hk, d, seed=12).to(dtype)
    table = torch.randperm(nb, generator=gen(13))[:9].reshape(3, 3).to(torch.int32)
    q = rnd(sum(qlens), h, d, seed=14).to(dtype)
    return q, kc, vc, table, ctx, qlens


def ref_prefix(q, kc, vc, table, ctx, qlens, scale, alibi=None):
    out = torch.zeros(q.shape[0], q.shape[1], vc.shape[-1], dtype=torch.float64)
    start = 0
    for i, (kl, ql) in enumerate(zip(ctx, qlens)):
        bias = None
        if alibi is not None:
            pos = [kl - ql + r for r in range(ql)]
            rel = torch.tensor([[j - p for j in range(kl)] for p in pos], dtype=torch.float64)
            if alibi[1] == "sqrt":
                rel = torch.sign(rel) * torch.sqrt(rel.abs())
            bias = alibi[0].double().view(-1, 1, 1) * rel
        out[start:start + ql] = ref_attention(q[start:start + ql], tokens_of(kc, table[i], kl),
                                              tokens_of(vc, table[i], kl), scale, bias, causal(ql, kl))[0]
        start += ql
    return out


def test_paged_attention_splitfuse_per_token_mask_rows():
    q, kc, vc, table, ctx, qlens = splitfuse_case()
    scale = 0.35
    rows = []  # op-plugin's make_attention_mask: -10000 after each token's position
    for kl, ql in zip(ctx, qlens):
        for r in range(ql):
            rows.append([0.0 if j <= kl - ql + r else -10000.0 for j in range(12)])
    mask = torch.tensor(rows, dtype=torch.float16)
    want = ref_prefix(q, kc, vc, table, ctx, qlens, scale)
    outs = {}
    for dev in ("cpu", "npu"):
        out = torch.empty(q.shape, dtype=q.dtype, device=dev)
        torch_npu._npu_paged_attention_splitfuse(q.to(dev), kc.to(dev), vc.to(dev), table.to(dev),
                                                 torch.tensor(ctx, dtype=torch.int32), mask.to(dev),
                                                 torch.tensor(qlens, dtype=torch.int32), 2, 4, scale, out)
        outs[dev] = out.cpu()
    assert_close(outs["npu"].double(), want, **TOL[torch.float16])
    assert torch.equal(outs["npu"], outs["cpu"])


def test_paged_attention_splitfuse_v2_compressed_mask_and_nz_cache():
    q, kc, vc, table, ctx, qlens = splitfuse_case()
    mask = torch.triu(torch.ones(64, 64, dtype=torch.float16), 1) * -10000.0
    out = torch.empty(q.shape, dtype=q.dtype, device="npu")
    torch_npu._npu_paged_attention_splitfuse_v2(
        query=q.npu(), key_cache=to_nz(kc).npu(), value_cache=to_nz(vc).npu(), block_table=table.npu(),
        context_lens=torch.tensor(ctx, dtype=torch.int32).npu(), mask=mask.npu(),
        seq_len=torch.tensor(qlens, dtype=torch.int32), num_kv_heads=2, num_heads=4, scale_value=0.35, out=out)
    assert_close(out.cpu().double(), ref_prefix(q, kc, vc, table, ctx, qlens, 0.35), **TOL[torch.float16])
    with pytest.raises(RuntimeError, match="mask_type only supports MASK_TYPE_NORM_COMPRESS"):
        torch_npu._npu_paged_attention_splitfuse_v2(q.npu(), kc.npu(), vc.npu(), table.npu(), torch.tensor(ctx),
                                                    mask.npu(), torch.tensor(qlens), 2, 4, 0.35, mask_type=1,
                                                    out=out)


def packed_case(h=4, hk=2, d=8, dv=8, lens=(3, 5), dtype=torch.float16):
    t = sum(lens)
    return (rnd(t, h, d, seed=21).to(dtype), rnd(t, hk, d, seed=22).to(dtype), rnd(t, hk, dv, seed=23).to(dtype),
            list(lens))


def ref_packed(q, k, v, lens, scale, bias_for=None, is_causal=False):
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[2], dtype=torch.float64)
    start = 0
    for i, s in enumerate(lens):
        sl = slice(start, start + s)
        allowed = causal(s, s) if is_causal else None
        out[sl] = ref_attention(q[sl], k[sl], v[sl], scale, bias_for(i, s) if bias_for else None, allowed)[0]
        start += s
    return out


def test_flash_attention_additive_mask_and_unpad():
    q, k, v, lens = packed_case(dv=6)
    scale = 0.3
    mask = torch.triu(torch.ones(8, 8), 1).to(torch.float16) * -10000.0  # [max_seq, max_seq]
    seq = torch.tensor(lens, dtype=torch.int32)
    outs = {}
    for dev in ("cpu", "npu"):
        out = torch.empty(8, 4, 6, dtype=torch.float16, device=dev)
        torch_npu._npu_flash_attention(q.to(dev), k.to(dev), v.to(dev), mask.to(dev), seq, scale, 4, 2, out)
        outs[dev] = out.cpu()
    want = ref_packed(q, k, v, lens, scale, lambda i, s: mask[:s, :s].double().unsqueeze(0))
    assert_close(outs["npu"].double(), want, **TOL[torch.float16])
    assert torch.equal(outs["npu"], outs["cpu"])
    # the same with the 310P NZ mask [1, 8 / 16 ... ] (here 16 x 16, one NZ column block)
    big = torch.triu(torch.ones(16, 16), 1).to(torch.float16) * -10000.0
    nz = torch_npu.npu_format_cast(big.reshape(16, 1, 16).permute(1, 0, 2).unsqueeze(0).contiguous().npu(), 29)
    out = torch.empty(8, 4, 6, dtype=torch.float16, device="npu")
    torch_npu._npu_flash_attention(q.npu(), k.npu(), v.npu(), nz, seq, scale, 4, 2, out)
    assert_close(out.cpu().double(), want, **TOL[torch.float16])
    # unpad: no mask at all; [T, heads * d] inputs are accepted too
    want = ref_packed(q, k, v, lens, scale)
    out = torch.empty(8, 4 * 6, dtype=torch.float16, device="npu")
    torch_npu._npu_flash_attention_unpad(q.reshape(8, -1).npu(), k.reshape(8, -1).npu(), v.reshape(8, -1).npu(),
                                         seq, scale, 4, 2, out)
    assert_close(out.cpu().view(8, 4, 6).double(), want, **TOL[torch.float16])
    out2 = torch.empty(8, 4, 6, dtype=torch.float16, device="npu")
    torch_npu._npu_flash_attention_unpad_v2(q.npu(), k.npu(), v.npu(), seq, scale, 4, 2, kernel_type=2, out=out2)
    assert torch.equal(out2.cpu().view(8, -1), out.cpu())
    with pytest.raises(RuntimeError, match="kernel_type only supports"):
        torch_npu._npu_flash_attention_unpad_v2(q.npu(), k.npu(), v.npu(), seq, scale, 4, 2, kernel_type=1, out=out2)


def test_flash_attention_v3_and_v2_mask_types():
    q, k, v, lens = packed_case(dtype=torch.bfloat16)
    scale = 0.3
    seq = torch.tensor(lens, dtype=torch.int32)
    mask = torch.triu(torch.ones(32, 32), 1).to(torch.bfloat16) * -10000.0
    out = torch.empty(8, 4, 8, dtype=torch.bfloat16, device="npu")
    torch_npu._npu_flash_attention_v3(q.npu(), k.npu(), v.npu(), mask.npu(), seq, scale, 4, 2, out=out)
    want = ref_packed(q, k, v, lens, scale, is_causal=True)
    assert_close(out.cpu().double(), want, **TOL[torch.bfloat16])
    # v2 mask_type 0 (none), 1 (additive), 4 (causal + alibi slopes)
    out = torch.empty(8, 4, 8, dtype=torch.bfloat16, device="npu")
    torch_npu._npu_flash_attention_v2(q.npu(), k.npu(), v.npu(), lens, mask_type=0, scale_value=scale, num_heads=4,
                                      num_kv_heads=2, out=out)
    assert_close(out.cpu().double(), ref_packed(q, k, v, lens, scale), **TOL[torch.bfloat16])
    torch_npu._npu_flash_attention_v2(q.npu(), k.npu(), v.npu(), lens, mask=mask.npu(), mask_type=1,
                                      scale_value=scale, num_heads=4, num_kv_heads=2, out=out)
    assert_close(out.cpu().double(), want, **TOL[torch.bfloat16])
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625])

    def alibi(i, s):
        return slopes.double().view(-1, 1, 1) * torch.tensor([[j - r for j in range(s)] for r in range(s)],
                                                             dtype=torch.float64)
    torch_npu._npu_flash_attention_v2(q.npu(), k.npu(), v.npu(), lens, mask=mask.npu(), slopes=slopes.npu(),
                                      mask_type=4, scale_value=scale, num_heads=4, num_kv_heads=2, out=out)
    assert_close(out.cpu().double(), ref_packed(q, k, v, lens, scale, alibi, True), **TOL[torch.bfloat16])


def test_prefix_attention_family():
    q, kc, vc, table, ctx, qlens = splitfuse_case(torch.bfloat16)
    scale = 0.35
    want = ref_prefix(q, kc, vc, table, ctx, qlens, scale)
    mask = torch.triu(torch.ones(128, 128), 1).to(torch.bfloat16)
    out = torch.empty(q.shape, dtype=q.dtype, device="npu")
    torch_npu._npu_flash_attention_qlens(q.npu(), kc.npu(), vc.npu(), table.npu(), mask.npu(),
                                        torch.tensor(qlens), torch.tensor(ctx), 2, 4, scale, out)
    assert_close(out.cpu().double(), want, **TOL[torch.bfloat16])
    out.zero_()
    torch_npu._npu_flash_attention_prefix_v2(q.npu(), kc.npu(), vc.npu(), table.npu(), mask.npu(), qlens, ctx,
                                             num_kv_heads=2, num_heads=4, scale_value=scale, out=out)
    assert_close(out.cpu().double(), want, **TOL[torch.bfloat16])
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625])
    torch_npu._npu_flash_attention_prefix_v2(q.npu(), kc.npu(), vc.npu(), table.npu(), mask.npu(), qlens, ctx,
                                             slopes=slopes.npu(), mask_type=5, num_kv_heads=2, num_heads=4,
                                             scale_value=scale, out=out)
    assert_close(out.cpu().double(), ref_prefix(q, kc, vc, table, ctx, qlens, scale, (slopes, "sqrt")),
                 **TOL[torch.bfloat16])
    got = torch_npu.npu_self_attention_prefix_encoder
    res = got(q.npu(), kc.npu(), vc.npu(), table.npu(), qlens, ctx, 4, scale, 2)
    assert res.shape == q.shape and res.dtype == q.dtype
    assert_close(res.cpu().double(), want, **TOL[torch.bfloat16])
    out2 = torch.empty_like(q).npu()
    assert got(q.npu(), kc.npu(), vc.npu(), table.npu(), qlens, ctx, 4, scale, 2, output=out2) is out2
    assert torch.equal(out2.cpu(), res.cpu())
    with pytest.raises(RuntimeError, match="Unsupported mask_type value: 'triangle'"):
        got(q.npu(), kc.npu(), vc.npu(), table.npu(), qlens, ctx, 4, scale, 2, mask_type="triangle")


# ------------------------------------------------------------------ caches

def test_reshape_and_cache_nd_nz_and_siso():
    t, h, dk, dv, bs, nb = 5, 2, 16, 8, 4, 6
    key, value = rnd(t, h, dk, seed=31).half(), rnd(t, h, dv, seed=32).half()
    slots = torch.tensor([3, 17, -1, 8, 22], dtype=torch.int32)
    kc, vc = torch.zeros(nb, bs, h, dk, dtype=torch.half), torch.zeros(nb, bs, h, dv, dtype=torch.half)
    kn, vn = kc.npu(), vc.npu()
    torch_npu._npu_reshape_and_cache(key.npu(), value.npu(), kn, vn, slots.npu())
    kc2, vc2 = kc.clone(), vc.clone()
    torch_npu._npu_reshape_and_cache(key, value, kc2, vc2, slots)  # on cpu too
    want_k, want_v = kc.clone(), vc.clone()
    for i, s in enumerate(slots.tolist()):
        if s >= 0:
            want_k[s // bs, s % bs] = key[i]
            want_v[s // bs, s % bs] = value[i]
    assert torch.equal(kn.cpu(), want_k) and torch.equal(vn.cpu(), want_v)
    assert torch.equal(kc2, want_k) and torch.equal(vc2, want_v)
    # NZ caches (both cast to NZ): token i's h * d values in 16-wide rows
    kz = torch_npu.npu_format_cast(torch.zeros(nb, h * dk // 16, bs, 16, dtype=torch.half).npu(), 29)
    vz = torch_npu.npu_format_cast(torch.zeros(nb, h * dv // 16, bs, 16, dtype=torch.half).npu(), 29)
    torch_npu._npu_reshape_and_cache(key.npu(), value.npu(), kz, vz, slots.npu())
    assert torch.equal(kz.cpu(), to_nz(want_k)) and torch.equal(vz.cpu(), to_nz(want_v))
    # siso: keys only
    kc3 = torch.zeros(nb, bs, h, dk, dtype=torch.half).npu()
    torch_npu._npu_reshape_and_cache_siso(key.npu(), kc3, slots.npu())
    assert torch.equal(kc3.cpu(), want_k)


def test_paged_cache_load_functional_out_starts_and_cumsum():
    nb, bs, h, dk, dv = 8, 4, 1, 8, 4
    kc, vc = rnd(nb, bs, h, dk, seed=41).half(), rnd(nb, bs, h, dv, seed=42).half()
    table = torch.randperm(nb, generator=gen(43)).reshape(2, 4).to(torch.int32)
    lens = torch.tensor([6, 3], dtype=torch.int32)
    starts = torch.tensor([0, 5], dtype=torch.int32)  # sequence 1 starts at block 5 // 4 = 1 of its row

    def want(cache):
        rows = []
        for b, length in enumerate(lens.tolist()):
            first = int(starts[b]) // bs
            rows += [cache[int(table[b, first + j // bs]), j % bs] for j in range(length)]
        return torch.stack(rows)
    k, v = torch_npu.npu_paged_cache_load(kc.npu(), vc.npu(), table.npu(), lens.npu(), seq_starts=starts.npu())
    assert k.shape == (9, h, dk) and v.shape == (9, h, dv)
    assert torch.equal(k.cpu(), want(kc)) and torch.equal(v.cpu(), want(vc))
    ko, vo = torch.empty(9, h, dk, dtype=torch.half).npu(), torch.empty(9, h, dv, dtype=torch.half).npu()
    cum = torch.tensor([0, 6, 9], dtype=torch.int32)
    res = torch_npu.npu_paged_cache_load(kc.npu(), vc.npu(), table.npu(), cum.npu(), seq_starts=starts.npu(),
                                         cumsum=True, key=ko, value=vo)
    assert res[0] is ko and res[1] is vo
    assert torch.equal(ko.cpu(), want(kc)) and torch.equal(vo.cpu(), want(vc))
    kcpu, _ = torch_npu.npu_paged_cache_load(kc, vc, table, lens, seq_starts=starts)
    assert torch.equal(kcpu, want(kc))


# ------------------------------------------------------------------ rotary, quantisation, routing, linear

def ref_rope(x, positions, cache, head_size, neox):
    rot = cache.shape[1]
    out = x.double().reshape(x.shape[0], -1, head_size).clone()
    for t, p in enumerate(positions.tolist()):
        for j in range(rot // 2):
            c, s = float(cache[p, j]), float(cache[p, rot // 2 + j])
            a, b = (j, rot // 2 + j) if neox else (2 * j, 2 * j + 1)
            x1, x2 = out[t, :, a].clone(), out[t, :, b].clone()
            out[t, :, a], out[t, :, b] = x1 * c - x2 * s, x2 * c + x1 * s
    return out.reshape(x.shape)


@pytest.mark.parametrize("neox", [True, False])
def test_rotary_embedding_in_place_partial_rotary(neox):
    positions = torch.tensor([4, 0, 7], dtype=torch.int64)
    hs, rot = 16, 8
    q, k = rnd(3, 2 * hs, seed=51).half(), rnd(3, hs, seed=52).half()
    cache = rnd(10, rot, seed=53).half()
    qn, kn = q.npu(), k.npu()
    torch_npu._npu_rotary_embedding(positions.npu(), qn, kn, hs, cache.npu(), neox)
    assert_close(qn.cpu().double(), ref_rope(q, positions, cache, hs, neox), **TOL[torch.float16])
    assert_close(kn.cpu().double(), ref_rope(k, positions, cache, hs, neox), **TOL[torch.float16])
    qc, kc = q.clone(), k.clone()
    torch_npu._npu_rotary_embedding(positions, qc, kc, hs, cache, neox)
    assert torch.equal(qc, qn.cpu()) and torch.equal(kc, kn.cpu())


def test_quantize_per_tensor_and_quant_rms_norm():
    x = (torch.arange(64, dtype=torch.float32).reshape(1, 4, 16) % 32 - 10).half() * 0.7
    scale = torch.tensor([0.25, 0.5, 1.0, 2.0], dtype=torch.half).repeat(16).reshape(4, 16)
    off = (torch.arange(64).reshape(4, 16) % 20 - 10).to(torch.int8)
    y = torch.zeros(1, 4, 16, dtype=torch.int8).npu()
    torch_npu._npu_quantize_per_tensor(x.npu(), scale.npu(), off.npu(), y)
    want = torch.clamp(torch.round(x.float() / scale.float()) + off.float(), -128, 127).to(torch.int8)
    assert torch.equal(y.cpu(), want)
    torch_npu._npu_quantize_per_tensor(x.npu(), scale.npu(), torch.empty(0, dtype=torch.int8).npu(), y)
    assert torch.equal(y.cpu(), torch.clamp(torch.round(x.float() / scale.float()), -128, 127).to(torch.int8))
    # rms norm quant
    xs = rnd(3, 16, seed=61).half()
    g, b = rnd(16, seed=62).half(), rnd(16, seed=63).half()
    s, o = torch.tensor([0.05], dtype=torch.half), torch.tensor([3], dtype=torch.int8)
    out = torch.empty(3, 16, dtype=torch.int8).npu()
    torch_npu._npu_quant_rms_norm(xs.npu(), g.npu(), b.npu(), s.npu(), o.npu(), out, 1e-6)
    xd = xs.double()
    norm = xd / torch.sqrt((xd * xd).mean(-1, keepdim=True) + 1e-6) * g.double() + b.double()
    want = torch.clamp(torch.round(norm / float(s)) + 3, -128, 127)
    assert (out.cpu().double() - want).abs().max() <= 1  # float32 vs float64 on rounding ties


def ref_group_topk(x, k, groups, n):
    out = x.clone()
    per = x.shape[1] // groups
    for t in range(x.shape[0]):
        scores = [sum(sorted(x[t, g * per:(g + 1) * per].float().tolist(), reverse=True)[:n]) for g in range(groups)]
        keep = sorted(range(groups), key=lambda g: -scores[g])[:k]  # Python's sort is stable
        for g in range(groups):
            if g not in keep:
                out[t, g * per:(g + 1) * per] = 0
    return out


def test_group_topk_in_place():
    x = rnd(5, 12, seed=71).half()
    xn = x.npu()
    torch_npu._npu_group_topk(xn, k=2, group_num=4, n=2)
    assert torch.equal(xn.cpu(), ref_group_topk(x, 2, 4, 2))


def ref_fused_add_topk_div(x, add, groups, gk, n, k, is_norm, scale, mapping=None):
    sig = torch.sigmoid(x.double())
    scores = sig + add.double()
    per = x.shape[1] // groups
    ys, idxs = [], []
    for t in range(x.shape[0]):
        row = scores[t].tolist()
        gs = [sum(sorted(row[g * per:(g + 1) * per], reverse=True)[:n]) for g in range(groups)]
        keep = sorted(range(groups), key=lambda g: -gs[g])[:gk]
        masked = [row[e] if e // per in keep else 0.0 for e in range(len(row))]
        order = sorted(range(len(row)), key=lambda e: -masked[e])
        top = order[:k]
        w = [float(sig[t, e]) for e in top]
        if is_norm:
            w = [v / sum(w) * scale for v in w]
        if mapping is not None:
            num, table = mapping
            off = order[gk * per - 1] + 7
            r = float(torch.tensor(100000007 % off, dtype=torch.float32) / torch.tensor(off, dtype=torch.float32))
            top = [int(table[e, int(math.floor(float(num[e]) * r))]) for e in top]
        ys.append(w)
        idxs.append(top)
    return torch.tensor(ys), torch.tensor(idxs, dtype=torch.int32)


def test_fused_add_topk_div_plain_and_expert_mapping():
    x, add = rnd(4, 16, seed=81).half(), rnd(16, seed=82).half()
    y, idx = torch_npu.npu_fused_add_topk_div(x.npu(), add.npu(), group_num=4, group_topk=2, n=2, k=3, is_norm=True,
                                              scale=2.5)
    wy, wi = ref_fused_add_topk_div(x, add, 4, 2, 2, 3, True, 2.5)
    assert y.dtype == torch.float32 and idx.dtype == torch.int32
    assert torch.equal(idx.cpu(), wi) and assert_close(y.cpu(), wy.float(), atol=1e-5, rtol=1e-5) is None
    num = torch.randint(1, 4, (16,), generator=gen(83), dtype=torch.int32)
    table = torch.randint(0, 40, (16, 3), generator=gen(84), dtype=torch.int32)
    yo, io = torch.empty(4, 3).npu(), torch.empty(4, 3, dtype=torch.int32).npu()
    res = torch_npu.npu_fused_add_topk_div(x.npu(), add.npu(), mapping_num=num.npu(), mapping_table=table.npu(),
                                           activation_type="activation_sigmoid", group_num=4, group_topk=2, n=2,
                                           k=3, is_norm=False, scale=1, enable_expert_mapping=True, y=yo, indices=io)
    assert res[0] is yo and res[1] is io
    wy, wi = ref_fused_add_topk_div(x, add, 4, 2, 2, 3, False, 1.0, (num, table))
    assert torch.equal(io.cpu(), wi)
    assert_close(yo.cpu(), wy.float(), atol=1e-5, rtol=1e-5)


def test_matmul_add_fp32():
    x, w = rnd(6, 4, seed=91).half(), rnd(6, 5, seed=92).half()
    c = rnd(4, 5, seed=93)
    cn = c.npu()
    torch_npu._npu_matmul_add_fp32(x.npu(), w.npu(), cn)
    assert_close(cn.cpu().double(), c.double() + x.double().t() @ w.double(), atol=1e-4, rtol=1e-4)


# ------------------------------------------------------------------ MLA

def mla_case(b=3, h=4, dn=32, dr=16, bs=4, nb=8, dtype=torch.float16):
    qn, qr = rnd(b, h, dn, seed=101).to(dtype), rnd(b, h, dr, seed=102).to(dtype)
    ctkv, kr = rnd(nb, bs, 1, dn, seed=103).to(dtype), rnd(nb, bs, 1, dr, seed=104).to(dtype)
    table = torch.randperm(nb, generator=gen(105))[:b * 2].reshape(b, 2).to(torch.int32)
    return qn, qr, ctkv, kr, table, [5, 8, 2]


def test_multi_head_latent_attention_decode_lse_and_out():
    qn, qr, ctkv, kr, table, lens = mla_case()
    scale = 0.2
    want = torch.zeros(3, 4, 32, dtype=torch.float64)
    want_lse = torch.zeros(3, 4, dtype=torch.float64)
    for i, length in enumerate(lens):
        k = torch.cat((tokens_of(ctkv, table[i], length), tokens_of(kr, table[i], length)), dim=-1)
        o, ls = ref_attention(torch.cat((qn, qr), -1)[i:i + 1], k, tokens_of(ctkv, table[i], length), scale)
        want[i], want_lse[i] = o[0], ls[:, 0]
    out = torch_npu.npu_multi_head_latent_attention(qn.npu(), qr.npu(), ctkv.npu(), kr.npu(), table.npu(), lens, 4,
                                                    scale, 1)
    assert out.shape == (3, 4, 32) and out.dtype == torch.float16
    assert_close(out.cpu().double(), want, **TOL[torch.float16])
    o, ls = torch_npu.npu_multi_head_latent_attention(qn.npu(), qr.npu(), ctkv.npu(), kr.npu(), table.npu(),
                                                      torch.tensor(lens, dtype=torch.int32), 4, scale, 1, True,
                                                      calc_type="calc_type_ring")
    assert ls.shape == (3, 4, 1)
    assert_close(ls.cpu().double().squeeze(-1), want_lse, atol=5e-3, rtol=5e-3)
    ws = torch_npu._npu_multi_head_latent_attention_get_workspace(qn.npu(), qr.npu(), ctkv.npu(), kr.npu(),
                                                                  table.npu(), lens, 4, scale, 1, True,
                                                                  calc_type="calc_type_ring")
    oo, lo = torch.empty(3, 4, 32, dtype=torch.half).npu(), torch.empty(3, 4, 1, dtype=torch.half).npu()
    torch_npu.npu_multi_head_latent_attention(qn.npu(), qr.npu(), ctkv.npu(), kr.npu(), table.npu(), lens, 4, scale,
                                              1, True, calc_type="calc_type_ring", workspace=ws, output=oo, lse=lo)
    assert torch.equal(oo.cpu(), o.cpu()) and torch.equal(lo.cpu(), ls.cpu())
    # NZ caches ([blocks, 512 / 16, bs, 16] in the real model) give the same result
    out_nz = torch_npu.npu_multi_head_latent_attention(
        qn.npu(), qr.npu(), torch_npu.npu_format_cast(to_nz(ctkv).npu(), 29),
        torch_npu.npu_format_cast(to_nz(kr).npu(), 29), table.npu(), lens, 4, scale, 1, cache_mode="nzcache")
    assert torch.equal(out_nz.cpu(), out.cpu())


def test_multi_head_latent_attention_spec_out_and_int8_nzcache():
    qn, qr, ctkv, kr, table, lens = mla_case(b=4)
    qlens = [2, 1, 1]  # calc_type_spec: several query tokens per sequence, causal
    scale = 0.2
    want = torch.zeros(4, 4, 32, dtype=torch.float64)
    start = 0
    for i, (ql, kl) in enumerate(zip(qlens, lens)):
        k = torch.cat((tokens_of(ctkv, table[i], kl), tokens_of(kr, table[i], kl)), dim=-1)
        want[start:start + ql] = ref_attention(torch.cat((qn, qr), -1)[start:start + ql], k,
                                               tokens_of(ctkv, table[i], kl), scale, None, causal(ql, kl))[0]
        start += ql
    out = torch.empty(4, 4, 32, dtype=torch.half).npu()
    res = torch_npu.npu_multi_head_latent_attention(qn.npu(), qr.npu(), ctkv.npu(), kr.npu(), table.npu(), lens, 4,
                                                    scale, 1, qseqlen=qlens, calc_type="calc_type_spec", output=out)
    assert res is out
    assert_close(out.cpu().double(), want, **TOL[torch.float16])
    # int8_nzcache: int8 q_nope / ctkv (NZ, c0 32), scores * qk_descale[h], int8 online softmax * pv_descale[h]
    qn8 = torch.randint(-8, 8, (3, 4, 32), generator=gen(106), dtype=torch.int8)
    ck8 = torch.randint(-8, 8, (8, 4, 1, 32), generator=gen(107), dtype=torch.int8)
    qkd, pvd = rnd(4, seed=108, lo=0.01, hi=0.03), rnd(4, seed=109, lo=0.01, hi=0.03)
    got = torch_npu.npu_multi_head_latent_attention(
        qn8.npu(), qr[:3].npu(), torch_npu.npu_format_cast(to_nz(ck8, 32).npu(), 29),
        torch_npu.npu_format_cast(to_nz(kr).npu(), 29), table.npu(), lens, 4, scale, 1, qk_descale=qkd.npu(),
        pv_descale=pvd.npu(), cache_mode="int8_nzcache")
    assert got.dtype == torch.float16 and got.shape == (3, 4, 32)
    want = torch.zeros(3, 4, 32, dtype=torch.float64)
    for i, length in enumerate(lens):
        kn, krr = tokens_of(ck8, table[i], length)[:, 0], tokens_of(kr, table[i], length)[:, 0]
        for head in range(4):
            s = ((qn8[i, head].double() @ kn.double().t()).float() * qkd[head]
                 + (qr[i, head].float() @ krr.float().t())) * scale
            e = torch.exp(s - s.max())
            p = torch.round((e / torch.tensor(1 / 127.0)).half().float())
            want[i, head] = (p.double() @ kn.double()) * float(pvd[head]) / 127 / float(e.sum())
    assert_close(got.cpu().double(), want, **TOL[torch.float16])


def test_ring_mla_first_and_merged():
    h, dn, dr, dv = 2, 8, 4, 8
    qlens, kvlens = [3, 2], [3, 4]
    qn, qr = rnd(5, h, dn, seed=111).half(), rnd(5, h, dr, seed=112).half()
    kn, kr, v = rnd(7, h, dn, seed=113).half(), rnd(7, h, dr, seed=114).half(), rnd(7, h, dv, seed=115).half()
    seqlen = torch.tensor([qlens, kvlens], dtype=torch.int32)
    mask = torch.triu(torch.ones(512, 512), 1).half()
    scale = 0.3
    want, want_lse = torch.zeros(5, h, dv, dtype=torch.float64), torch.zeros(h, 5, dtype=torch.float64)
    qs = ks = 0
    for ql, kl in zip(qlens, kvlens):
        o, ls = ref_attention(torch.cat((qn, qr), -1)[qs:qs + ql], torch.cat((kn, kr), -1)[ks:ks + kl],
                              v[ks:ks + kl], scale, None, causal(ql, kl))
        want[qs:qs + ql], want_lse[:, qs:qs + ql] = o, ls
        qs, ks = qs + ql, ks + kl
    o, ls = torch_npu.npu_ring_mla(qn.npu(), qr.npu(), kn.npu(), kr.npu(), v.npu(), mask.npu(), seqlen, h, h,
                                   qk_scale=scale, mask_type="mask_type_triu", calc_type="calc_type_first_ring")
    assert ls.dtype == torch.float32 and ls.shape == (h, 5)
    assert_close(o.cpu().double(), want, **TOL[torch.float16])
    assert_close(ls.cpu().double(), want_lse, atol=1e-4, rtol=1e-4)
    prev_o, prev_l = rnd(5, h, dv, seed=116).half(), rnd(h, 5, seed=117)
    oo, lo = torch.empty(5, h, dv, dtype=torch.half).npu(), torch.empty(h, 5).npu()
    torch_npu.npu_ring_mla(qn.npu(), qr.npu(), kn.npu(), kr.npu(), v.npu(), mask.npu(), seqlen, h, h,
                           pre_out=prev_o.npu(), prev_lse=prev_l.npu(), qk_scale=scale, mask_type="mask_type_triu",
                           calc_type="calc_type_default", output=oo, softmax_lse=lo)
    wo, wn = torch.exp(prev_l.double()), torch.exp(want_lse)
    merged = (prev_o.double() * wo.t().unsqueeze(-1) + want * wn.t().unsqueeze(-1)) / (wo + wn).t().unsqueeze(-1)
    assert_close(oo.cpu().double(), merged, **TOL[torch.float16])
    assert_close(lo.cpu().double(), torch.log(wo + wn), atol=1e-4, rtol=1e-4)
    with pytest.raises(RuntimeError, match="Expected CPU tensor"):
        torch_npu.npu_ring_mla(qn.npu(), qr.npu(), kn.npu(), kr.npu(), v.npu(), mask.npu(), seqlen.npu(), h, h)


@pytest.mark.parametrize("cache_mode,quant_mode", [("krope_ctkv", "per_tensor_quant_asymm"),
                                                   ("int8_nzcache", "per_token_quant_symm")])
def test_mla_preprocess(cache_mode, quant_mode):
    t, hidden, dkv, dr, qlora, heads, dnope, bs, nb = 2, 32, 32, 16, 16, 2, 8, 4, 3
    dtype = torch.float16
    per_token, int8 = quant_mode == "per_token_quant_symm", cache_mode == "int8_nzcache"
    x = rnd(t, hidden, seed=121).to(dtype)
    g0, b0 = rnd(hidden, seed=122).to(dtype), (rnd(hidden, seed=123) * 0.1).to(dtype)
    w0 = torch.randint(-3, 4, (dkv + dr + qlora, hidden), generator=gen(124), dtype=torch.int8)
    d0 = rnd(dkv + dr + qlora, seed=125, lo=0.001, hi=0.01)
    g1, b1 = rnd(qlora, seed=126).to(dtype), (rnd(qlora, seed=127) * 0.1).to(dtype)
    w1 = torch.randint(-3, 4, (heads * (dnope + dr), qlora), generator=gen(128), dtype=torch.int8)
    d1 = rnd(heads * (dnope + dr), seed=129, lo=0.001, hi=0.01)
    g2 = rnd(dkv, seed=130).to(dtype)
    cos, sin = rnd(t, dr, seed=131).to(dtype), rnd(t, dr, seed=132).to(dtype)
    wuk = rnd(heads, dnope, dkv, seed=133).to(dtype)
    if int8:  # NZ caches: int8 latent in 32-wide rows, rope in 16-wide rows
        kv_cache = torch_npu.npu_format_cast(torch.zeros(nb, dkv // 32, bs, 32, dtype=torch.int8).npu(), 29)
        kv_rope = torch_npu.npu_format_cast(torch.zeros(nb, dr // 16, bs, 16, dtype=dtype).npu(), 29)
    else:
        kv_cache = torch.zeros(nb, bs, 1, dkv, dtype=dtype).npu()
        kv_rope = torch.zeros(nb, bs, 1, dr, dtype=dtype).npu()
    slots = torch.tensor([5, 10], dtype=torch.int32)
    s0, o0 = torch.tensor([0.02], dtype=dtype), torch.tensor([1], dtype=torch.int8)
    s1, o1 = torch.tensor([0.03], dtype=dtype), torch.tensor([-2], dtype=torch.int8)
    bias0 = torch.randint(-5, 5, (dkv + dr + qlora,), generator=gen(134), dtype=torch.int32)
    bias1 = torch.randint(-5, 5, (heads * (dnope + dr),), generator=gen(135), dtype=torch.int32)
    ctkv_scale, qn_scale = torch.tensor([0.05], dtype=dtype), torch.tensor([0.5, 0.25], dtype=dtype)
    w0_nz = w0.reshape(-1, hidden // 32, 32).permute(1, 0, 2).unsqueeze(0).contiguous()  # [1, K / 32, N, 32]
    kw = dict(quant_scale0=s0.npu(), quant_offset0=o0.npu(), bias0=bias0.npu(), quant_scale1=s1.npu(),
              quant_offset1=o1.npu(), bias1=bias1.npu(), ctkv_scale=ctkv_scale.npu(), q_nope_scale=qn_scale.npu(),
              cache_mode=cache_mode, quant_mode=quant_mode)
    args = (x.npu(), g0.npu(), b0.npu(), torch_npu.npu_format_cast(w0_nz.npu(), 29), d0.npu(), g1.npu(), b1.npu(),
            w1.npu(), d1.npu(), g2.npu(), cos.npu(), sin.npu(), wuk.npu(), kv_cache, kv_rope, slots.npu())
    q0, kc0, q1, kc1 = torch_npu.npu_mla_preprocess(*args, **kw)
    assert q0.shape == (t, heads, dkv) and q1.shape == (t, heads, dr) and kc0.shape == kv_cache.shape
    assert q0.dtype == (torch.int8 if int8 else dtype) and q1.dtype == dtype
    assert not kv_cache.cpu().any()  # the functional form leaves the caches alone

    def rms(v, g, b=None):
        v = v.double()
        r = v / torch.sqrt((v * v).mean(-1, keepdim=True) + 1e-5) * g.double()
        return r + b.double() if b is not None else r

    def qlinear(h, w, d, bias, s, o):
        if per_token:
            tok = h.abs().amax(-1, keepdim=True) / 127
            return (torch.clamp(torch.round(h / tok), -128, 127) @ w.double().t()) * d.double() * tok
        xq = torch.clamp(torch.round(h / float(s)) + float(o), -128, 127)
        return ((xq @ w.double().t()) + bias.double()) * d.double()

    def rope(v, c, s_):
        half = v.shape[-1] // 2
        return v * c + torch.cat((-v[..., half:], v[..., :half]), -1) * s_

    down = qlinear(rms(x, g0, b0).half().double(), w0, d0, bias0, s0, o0).half().double()
    up = qlinear(rms(down[:, dkv + dr:], g1, b1).half().double(), w1, d1, bias1, s1, o1).half().double()
    up = up.view(t, heads, dnope + dr)
    want_q0 = torch.einsum("thd,hdk->thk", up[..., :dnope], wuk.double())
    want_q1 = rope(up[..., dnope:], cos.double().unsqueeze(1), sin.double().unsqueeze(1))
    want_ctkv = rms(down[:, :dkv], g2)
    want_krope = rope(down[:, dkv:dkv + dr], cos.double(), sin.double())
    if int8:
        want_q0 = torch.clamp(torch.round(want_q0 / qn_scale.double().view(1, -1, 1)), -128, 127)
        want_ctkv = torch.clamp(torch.round(want_ctkv / float(ctkv_scale)), -128, 127)
        assert (q0.cpu().double() - want_q0).abs().max() <= 1
    else:
        assert_close(q0.cpu().double(), want_q0, atol=2e-2, rtol=1e-2)
    assert_close(q1.cpu().double(), want_q1, atol=2e-2, rtol=1e-2)
    for i, s in enumerate(slots.tolist()):
        if int8:
            row, rope_row = kc0.cpu()[s // bs, :, s % bs].reshape(-1), kc1.cpu()[s // bs, :, s % bs].reshape(-1)
            assert (row.double() - want_ctkv[i]).abs().max() <= 1
        else:
            row, rope_row = kc0.cpu()[s // bs, s % bs, 0], kc1.cpu()[s // bs, s % bs, 0]
            assert_close(row.double(), want_ctkv[i], atol=2e-2, rtol=1e-2)
        assert_close(rope_row.double(), want_krope[i], atol=2e-2, rtol=1e-2)
    assert int((kc1.cpu() != 0).flatten(1).any(-1).sum()) == 2  # only the two slots' blocks written
    # the out form writes the caches in place
    oq0, oq1 = torch.empty_like(q0), torch.empty_like(q1)
    torch_npu.npu_mla_preprocess(*args, **kw, q_out0=oq0, kv_cache_out0=kv_cache, q_out1=oq1, kv_cache_out1=kv_rope)
    assert torch.equal(oq0.cpu(), q0.cpu()) and torch.equal(oq1.cpu(), q1.cpu())
    assert torch.equal(kv_cache.cpu(), kc0.cpu()) and torch.equal(kv_rope.cpu(), kc1.cpu())


# ------------------------------------------------------------------ bad input

def test_bad_inputs_raise_naming_the_argument():
    q, kc, vc, table, lens = paged_inputs()
    out = torch.empty(3, 4, 8, dtype=torch.float16).npu()
    qn, kn, vn = q.npu(), kc.npu(), vc.npu()
    bad = table.clone()
    bad[2, 1] = 99  # used by sequence 2 (9 tokens of block size 4)
    with pytest.raises(RuntimeError, match=r"block_table\[2\] holds block id 99"):
        torch_npu._npu_paged_attention(qn, kn, vn, 2, 4, 0.3, bad.npu(), lens, out)
    with pytest.raises(RuntimeError, match="context_lens\\[2\\] = 20 needs 5 blocks"):
        torch_npu._npu_paged_attention(qn, kn, vn, 2, 4, 0.3, table.npu(), torch.tensor([1, 1, 20]), out)
    with pytest.raises(RuntimeError, match="num_kv_heads \\(3\\) should be positive and divide num_heads"):
        torch_npu._npu_paged_attention(qn, kn, vn, 3, 4, 0.3, table.npu(), lens, out)
    with pytest.raises(RuntimeError, match="query has 4 heads but num_heads is 8"):
        torch_npu._npu_paged_attention(qn, kn, vn, 2, 8, 0.3, table.npu(), lens, out)
    with pytest.raises(RuntimeError, match="key_cache should have query's dtype"):
        torch_npu._npu_paged_attention(qn, kn.bfloat16(), vn, 2, 4, 0.3, table.npu(), lens, out)
    with pytest.raises(RuntimeError, match="key_cache of shape .* does not hold 1 kv heads"):
        torch_npu._npu_paged_attention(qn, kn, vn, 1, 4, 0.3, table.npu(), lens, out)
    with pytest.raises(RuntimeError, match="query should be float16, bfloat16"):
        torch_npu._npu_paged_attention(qn.float(), kn.float(), vn.float(), 2, 4, 0.3, table.npu(), lens, out)
    with pytest.raises(RuntimeError, match="slot_indices holds slot 99"):
        torch_npu._npu_reshape_and_cache(q.npu(), q.npu(), torch.zeros(2, 4, 4, 8).half().npu(),
                                         torch.zeros(2, 4, 4, 8).half().npu(), torch.tensor([0, 1, 99]).int().npu())
    with pytest.raises(RuntimeError, match="quant_type 2 .* is not supported on vNPU"):
        torch_npu._npu_paged_attention_quant(qn, kn, vn, 2, 4, 0.3, table.npu(), lens, 2, 1, q, q, out)
    with pytest.raises(RuntimeError, match="Unsupported cache_mode value: 'zz'"):
        torch_npu.npu_multi_head_latent_attention(qn, qn, kn, kn, table.npu(), [1, 1, 1], 4, 0.3, 2,
                                                  cache_mode="zz")
    with pytest.raises(RuntimeError, match="seq_len sums to 9 but the query has 3 tokens"):
        torch_npu._npu_flash_attention_unpad(qn, qn, qn, torch.tensor([4, 5]), 0.3, 4, 4, out)
    with pytest.raises(RuntimeError, match="the number of groups to keep \\(5\\)"):
        torch_npu._npu_group_topk(torch.zeros(2, 8).half().npu(), k=5, group_num=4, n=1)


# ------------------------------------------------------------------ tracing

def test_fake_tensor_shapes():
    with FakeTensorMode() as mode:
        x, add = torch.empty(6, 16, dtype=torch.float16), torch.empty(16, dtype=torch.float16)
        y, idx = torch.ops.atb.npu_fused_add_topk_div(x, add, group_num=4, group_topk=2, n=2, k=3)
        assert y.shape == (6, 3) and y.dtype == torch.float32 and idx.dtype == torch.int32
        qn, qr = torch.empty(3, 4, 16, dtype=torch.float16), torch.empty(3, 4, 8, dtype=torch.float16)
        ck, kr = torch.empty(8, 4, 1, 16, dtype=torch.float16), torch.empty(8, 4, 1, 8, dtype=torch.float16)
        table = mode.from_tensor(torch.zeros(3, 2, dtype=torch.int32))
        out = torch.ops.atb.npu_multi_head_latent_attention(qn, qr, ck, kr, table, [5, 8, 2], 4, 0.2, 1)
        assert out.shape == (3, 4, 16) and out.dtype == torch.float16
        q, kc = torch.empty(3, 4, 8, dtype=torch.float16), torch.empty(10, 4, 2, 8, dtype=torch.float16)
        o = torch.empty(3, 4, 8, dtype=torch.float16)
        torch.ops.atb._npu_paged_attention(q, kc, kc, 2, 4, 0.3, mode.from_tensor(torch.zeros(3, 3).int()),
                                           mode.from_tensor(torch.tensor([5, 1, 9]).int()), o)
        assert o.shape == (3, 4, 8)


def test_torch_compile_eager_backend():
    positions = torch.tensor([1, 3], dtype=torch.int64).npu()
    cache = rnd(8, 8, seed=141).half().npu()

    def f(q, k, x, add):
        torch_npu._npu_rotary_embedding(positions, q, k, 8, cache, True)
        y, idx = torch_npu.npu_fused_add_topk_div(x, add, group_num=2, group_topk=1, n=1, k=2)
        return q * 2, k + 1, y, idx
    q, k = rnd(2, 16, seed=142).half().npu(), rnd(2, 8, seed=143).half().npu()
    x, add = rnd(2, 8, seed=144).half().npu(), rnd(8, seed=145).half().npu()
    want = f(q.clone(), k.clone(), x, add)
    got = torch.compile(f, backend="eager")(q.clone(), k.clone(), x, add)
    for a, b in zip(got, want):
        assert torch.equal(a.cpu(), b.cpu())
