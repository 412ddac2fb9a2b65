"""torch_npu.op_plugin.infer_cache: the KV-cache writing ops (MLA's kv_rmsnorm_rope_cache, qkv_rms_norm_rope_cache,
scatter_pa_cache, rope_quant_kvcache), the gated delta rule (recurrent and chunked) and causal conv1d recurrences
against step-by-step loops written here, the sampling / advance-step / ring-attention helpers; npu against cpu,
op-plugin's schemas, argument errors, FakeTensor and torch.compile."""

import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import gen, rnd

F16 = dict(atol=2e-3, rtol=2e-3)
BF16 = dict(atol=2e-2, rtol=2e-2)


def on_npu(*tensors):
    return [t.npu() if isinstance(t, torch.Tensor) else t for t in tensors]


# --- schemas -------------------------------------------------------------------

SCHEMAS = [
    "npu_kv_rmsnorm_rope_cache(Tensor kv, Tensor gamma, Tensor cos, Tensor sin, Tensor index, Tensor k_cache, "
    "Tensor ckv_cache, *, Tensor? k_rope_scale=None, Tensor? c_kv_scale=None, Tensor? k_rope_offset=None, "
    "Tensor? c_kv_offset=None, Tensor? v=None, float epsilon=1e-5, str cache_mode='Norm', bool is_output_kv=False) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
    "npu_kv_rmsnorm_rope_cache_v2(Tensor kv, Tensor gamma, Tensor cos, Tensor sin, Tensor index, Tensor(a!) k_cache, "
    "Tensor(b!) ckv_cache, *, Tensor? k_rope_scale=None, Tensor? c_kv_scale=None, Tensor? k_rope_offset=None, "
    "Tensor? c_kv_offset=None, Tensor? v=None, float epsilon=1e-5, str cache_mode='Norm', bool is_output_kv=False, "
    "int? k_cache_dtype=None, int? ckv_cache_dtype=None) -> (Tensor, Tensor)",
    "npu_kv_rmsnorm_rope_cache_v2_functional(Tensor kv, Tensor gamma, Tensor cos, Tensor sin, Tensor index, "
    "Tensor k_cache, Tensor ckv_cache, *, Tensor? k_rope_scale=None, Tensor? c_kv_scale=None, "
    "Tensor? k_rope_offset=None, Tensor? c_kv_offset=None, Tensor? v=None, float epsilon=1e-5, "
    "str cache_mode='Norm', bool is_output_kv=False, int? k_cache_dtype=None, int? ckv_cache_dtype=None) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
    "npu_qkv_rms_norm_rope_cache(Tensor qkv, Tensor q_gamma, Tensor k_gamma, Tensor cos, Tensor sin, Tensor index, "
    "Tensor(a!) q_out, Tensor(b!) k_cache, Tensor(c!) v_cache, int[4] qkv_size, int[3] head_nums, *, "
    "Tensor? k_scale=None, Tensor? v_scale=None, Tensor? k_offset=None, Tensor? v_offset=None, float epsilon=1e-6, "
    "str cache_mode='PA_NZ', bool is_output_qkv=False) -> (Tensor, Tensor, Tensor)",
    "npu_qkv_rms_norm_rope_cache_functional(Tensor qkv, Tensor q_gamma, Tensor k_gamma, Tensor cos, Tensor sin, "
    "Tensor index, Tensor q_out, Tensor k_cache, Tensor v_cache, int[4] qkv_size, int[3] head_nums, *, "
    "Tensor? k_scale=None, Tensor? v_scale=None, Tensor? k_offset=None, Tensor? v_offset=None, float epsilon=1e-6, "
    "str cache_mode='PA_NZ', bool is_output_qkv=False) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    "npu_scatter_pa_cache.value(Tensor key, Tensor slot_mapping, *, Tensor? compress_lens=None, "
    "Tensor? compress_seq_offsets=None, Tensor? seq_lens=None, Tensor(a!) key_cache) -> Tensor(a!)",
    "npu_rope_quant_kvcache(Tensor x, Tensor cos, Tensor sin, Tensor k_cache, Tensor v_cache, Tensor indices, "
    "Tensor scale_k, Tensor scale_v, int[3] size_splits, *, Tensor? offset_k=None, Tensor? offset_v=None, "
    "int quant_mode=0, str input_layout=\"BSND\", bool kv_output=False, str cache_mode=\"contiguous\") "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "npu_dequant_rope_quant_kvcache(Tensor x, Tensor cos, Tensor sin, Tensor k_cache, Tensor v_cache, "
    "Tensor indices, Tensor scale_k, Tensor scale_v, int[3] size_splits, *, Tensor? offset_k=None, "
    "Tensor? offset_v=None, Tensor? weight_scale=None, Tensor? activation_scale=None, Tensor? bias=None, "
    "int quant_mode=0, str input_layout=\"BSND\", bool kv_output=False, str cache_mode=\"contiguous\") "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "npu_chunk_gated_delta_rule(Tensor query, Tensor key, Tensor value, *, Tensor? beta=None, "
    "Tensor? initial_state=None, Tensor? actual_seq_lengths=None, float? scale=None, Tensor? g=None) "
    "-> (Tensor, Tensor)",
    "npu_recurrent_gated_delta_rule(Tensor query, Tensor key, Tensor value, Tensor(a!) state, *, Tensor? beta=None, "
    "float? scale=None, Tensor? actual_seq_lengths=None, Tensor? ssm_state_indices=None, "
    "Tensor? num_accepted_tokens=None, Tensor? g=None, Tensor? gk=None) -> Tensor",
    "npu_recurrent_gated_delta_rule_functional(Tensor query, Tensor key, Tensor value, Tensor state, *, "
    "Tensor? beta=None, float? scale=None, Tensor? actual_seq_lengths=None, Tensor? ssm_state_indices=None, "
    "Tensor? num_accepted_tokens=None, Tensor? g=None, Tensor? gk=None) -> (Tensor, Tensor)",
    "npu_fused_causal_conv1d(Tensor x, Tensor weight, Tensor(a!) conv_states, *, Tensor? query_start_loc=None, "
    "Tensor? cache_indices=None, Tensor? initial_state_mode=None, Tensor? bias=None, Tensor? num_accepted_tokens=None, "
    "str? activation=\"None\", int? pad_slot_id=-1, int? run_mode=0, int? residual_connection=0, "
    "int? max_query_len=-1, Tensor? num_computed_tokens=None, Tensor? block_idx_first_scheduled_token=None, "
    "Tensor? block_idx_last_scheduled_token=None, Tensor? initial_state_idx=None, int? block_size=128, "
    "str? conv_mode=\"default\") -> Tensor",
    "npu_fused_causal_conv1d_v2(Tensor(a!) x, Tensor weight, Tensor(b!) conv_states, *, "
    "Tensor? query_start_loc=None, Tensor? cache_indices=None, Tensor? initial_state_mode=None, Tensor? bias=None, "
    "Tensor? num_accepted_tokens=None, str? activation=\"None\", int? pad_slot_id=-1, int? run_mode=0, "
    "int? residual_connection=0, int? max_query_len=-1, Tensor? num_computed_tokens=None, "
    "Tensor? block_idx_first_scheduled_token=None, Tensor? block_idx_last_scheduled_token=None, "
    "Tensor? initial_state_idx=None, int? block_size=128, str? conv_mode=\"default\") -> ()",
    "npu_masked_causal_conv1d(Tensor input, Tensor weight, *, Tensor? mask=None) -> Tensor",
    "npu_masked_causal_conv1d_backward(Tensor grad_output, Tensor input, Tensor weight, *, Tensor? mask=None) "
    "-> (Tensor, Tensor)",
    "npu_top_k_top_p_sample(Tensor logits, Tensor top_k, Tensor top_p, Tensor? q=None, float? eps=1e-8, "
    "bool? is_need_logits=False, int? top_k_guess=32, Tensor? min_ps=None, int? ks_max=1024, "
    "bool? input_is_logits=True, str? post_sample='qSample', Generator? generator=None) -> (Tensor, Tensor)",
    "npu_advance_step_flashattn(Tensor(a!) input_tokens, Tensor sampled_token_ids, Tensor(b!) input_positions, "
    "Tensor(c!) seq_lens, Tensor(d!) slot_mapping, Tensor block_tables, int num_seqs, int num_queries, "
    "int block_size, *, Tensor? spec_token=None, Tensor? accepted_num=None) -> ()",
    "npu_ring_attention_update(Tensor prev_attn_out, Tensor prev_softmax_max, Tensor prev_softmax_sum, "
    "Tensor cur_attn_out, Tensor cur_softmax_max, Tensor cur_softmax_sum, *, Tensor? actual_seq_qlen=None, "
    "str input_layout=\"SBH\", str input_softmax_layout=\"\") -> (Tensor, Tensor, Tensor)",
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.split("(")[0])
def test_schema_is_op_plugins(schema):
    name = schema.split("(")[0]
    packet, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.npu, packet), overload or "default")
    assert str(op._schema) == str(torch._C.parse_schema("npu::" + schema))
    assert getattr(torch_npu, packet) is not None


# --- npu_kv_rmsnorm_rope_cache -------------------------------------------------

def rms_ref(x, gamma, eps):
    x = x.double()
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * gamma.double()


def rope_interleaved_ref(x, cos, sin):
    """One token's rope part: (x0, x1), (x2, x3) ... pairs de-interleaved, then x cos + rotate_half(x) sin."""
    x = x.double()
    k = torch.cat((x[0::2], x[1::2]))
    half = k.shape[0] // 2
    return k * cos.double() + torch.cat((-k[half:], k[:half])) * sin.double()


def put_token(cache, slot, values, nz):
    """cache (blocks, block_size, 1, D), ND or with its bytes in NZ order (blocks, D / d0, block_size, d0)."""
    blocks, block_size, _, d = cache.shape
    blk, off = divmod(slot, block_size)
    if nz:
        d0 = 32 // cache.element_size()
        view = cache.view(blocks, d // d0, block_size, d0)
        for r in range(d // d0):
            view[blk, r, off] = values[r * d0:(r + 1) * d0]
    else:
        cache[blk, off, 0] = values


def kv_inputs(b=2, s=3, rms=32, rope=16, dtype=torch.float16, seed=0):
    kv = rnd(b, 1, s, rms + rope, seed=seed).to(dtype)
    gamma = rnd(rms, seed=seed + 1, lo=0.5, hi=1.5).to(dtype)
    cos = rnd(b, 1, s, rope, seed=seed + 2).to(dtype)
    sin = rnd(b, 1, s, rope, seed=seed + 3).to(dtype)
    return kv, gamma, cos, sin


@pytest.mark.parametrize("mode", ["PA", "PA_BNSD", "PA_NZ"])
def test_kv_rmsnorm_rope_cache_paged(mode):
    b, s, rms, rope, blocks, bs = 2, 3, 32, 16, 3, 4
    kv, gamma, cos, sin = kv_inputs(b, s, rms, rope)
    index = torch.tensor([5, -1, 0, 11, 2, 7])  # token 1 is padding
    k_cache = rnd(blocks, bs, 1, rope, seed=9).half()
    ckv_cache = rnd(blocks, bs, 1, rms, seed=10).half()
    kc, cc = k_cache.npu(), ckv_cache.npu()
    outs = torch_npu.npu_kv_rmsnorm_rope_cache(*on_npu(kv, gamma, cos, sin, index), kc, cc, epsilon=1e-5,
                                               cache_mode=mode, is_output_kv=True)
    assert outs[0] is kc and outs[1] is cc
    k_ref, c_ref = k_cache.clone(), ckv_cache.clone()
    k_rope = torch.empty(b, 1, s, rope, dtype=torch.float64)
    c_kv = torch.empty(b, 1, s, rms, dtype=torch.float64)
    for i in range(b):
        for j in range(s):
            k_rope[i, 0, j] = rope_interleaved_ref(kv[i, 0, j, rms:], cos[i, 0, j], sin[i, 0, j])
            c_kv[i, 0, j] = rms_ref(kv[i, 0, j, :rms], gamma, 1e-5)
            slot = int(index[i * s + j])
            if slot >= 0:
                put_token(k_ref, slot, k_rope[i, 0, j].half(), mode == "PA_NZ")
                put_token(c_ref, slot, c_kv[i, 0, j].half(), mode == "PA_NZ")
    assert_close(kc.cpu(), k_ref, **F16)
    assert_close(cc.cpu(), c_ref, **F16)
    assert outs[2].dtype == torch.float16 and outs[2].shape == (b, 1, s, rope) and outs[3].shape == (b, 1, s, rms)
    assert_close(outs[2].cpu().double(), k_rope, **F16)
    assert_close(outs[3].cpu().double(), c_kv, **F16)
    # cpu gives the same bits
    kc2, cc2 = k_cache.clone(), ckv_cache.clone()
    cpu = torch_npu.npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, kc2, cc2, cache_mode=mode)
    assert torch.equal(kc2, kc.cpu()) and torch.equal(cc2, cc.cpu()) and torch.equal(cpu[2], outs[2].cpu())


def test_kv_rmsnorm_rope_cache_norm_and_blk_modes():
    b, s, rms, rope = 2, 3, 32, 16
    kv, gamma, cos, sin = kv_inputs(b, s, rms, rope, seed=20)
    # Norm: caches (B, 1, L, D), index (B, S) positions inside each batch's cache
    k_cache, c_cache = torch.zeros(b, 1, 5, rope).half(), torch.zeros(b, 1, 5, rms).half()
    index = torch.tensor([[4, 0, 2], [1, -1, 3]])
    kc, cc = k_cache.clone(), c_cache.clone()
    torch_npu.npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, kc, cc, cache_mode="Norm")
    for i in range(b):
        for j in range(s):
            if index[i, j] >= 0:
                k_cache[i, 0, index[i, j]] = rope_interleaved_ref(kv[i, 0, j, rms:], cos[i, 0, j], sin[i, 0, j]).half()
                c_cache[i, 0, index[i, j]] = rms_ref(kv[i, 0, j, :rms], gamma, 1e-5).half()
    assert_close(kc, k_cache, **F16)
    assert_close(cc, c_cache, **F16)
    # PA_BLK_BNSD / PA_BLK_NZ: one start offset per block of block_size tokens
    bs, blocks = 2, 5
    starts = torch.tensor([4, 0, 8, -1])  # batch 0: blocks 2 then 0; batch 1: block 4, then padding
    for mode in ("PA_BLK_BNSD", "PA_BLK_NZ"):
        kc, cc = torch.zeros(blocks, bs, 1, rope).half().npu(), torch.zeros(blocks, bs, 1, rms).half().npu()
        torch_npu.npu_kv_rmsnorm_rope_cache(*on_npu(kv, gamma, cos, sin, starts), kc, cc, cache_mode=mode)
        k_ref, c_ref = torch.zeros_like(kc.cpu()), torch.zeros_like(cc.cpu())
        for i in range(b):
            for j in range(s):
                start = int(starts[i * 2 + j // bs])
                if start < 0:
                    continue
                slot = start // bs * bs + j % bs
                put_token(k_ref, slot, rope_interleaved_ref(kv[i, 0, j, rms:], cos[i, 0, j], sin[i, 0, j]).half(),
                          mode.endswith("NZ"))
                put_token(c_ref, slot, rms_ref(kv[i, 0, j, :rms], gamma, 1e-5).half(), mode.endswith("NZ"))
        assert_close(kc.cpu(), k_ref, **F16)
        assert_close(cc.cpu(), c_ref, **F16)
        kc_cpu = torch.zeros_like(k_ref)
        torch_npu.npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, starts, kc_cpu, torch.zeros_like(c_ref),
                                            cache_mode=mode)
        assert torch.equal(kc_cpu, kc.cpu())


def test_kv_rmsnorm_rope_cache_quantised_and_v2():
    b, s, rms, rope, blocks, bs = 1, 4, 32, 32, 2, 4  # int8 NZ rows are 32 wide
    kv, gamma, cos, sin = kv_inputs(b, s, rms, rope, dtype=torch.bfloat16, seed=30)
    k_scale = rnd(rope, seed=31, lo=5, hi=20)
    c_scale = rnd(rms, seed=32, lo=5, hi=20)
    index = torch.tensor([6, 1, 3, 4])
    kc, cc = torch.zeros(blocks, bs, 1, rope, dtype=torch.int8), torch.zeros(blocks, bs, 1, rms, dtype=torch.int8)
    kc, cc = kc.npu(), cc.npu()
    _, _, k_rope, c_kv = torch_npu.npu_kv_rmsnorm_rope_cache(*on_npu(kv, gamma, cos, sin, index), kc, cc,
                                                             k_rope_scale=k_scale.npu(), c_kv_scale=c_scale.npu(),
                                                             cache_mode="PA_NZ")
    k_ref, c_ref = torch.zeros_like(kc.cpu()), torch.zeros_like(cc.cpu())
    for j in range(s):
        kq = torch.round(rope_interleaved_ref(kv[0, 0, j, rms:], cos[0, 0, j], sin[0, 0, j]) * k_scale.double())
        cq = torch.round(rms_ref(kv[0, 0, j, :rms], gamma, 1e-5) * c_scale.double())
        put_token(k_ref, int(index[j]), kq.clamp(-128, 127).to(torch.int8), True)  # int8 NZ rows are 32 wide
        put_token(c_ref, int(index[j]), cq.clamp(-128, 127).to(torch.int8), True)
    kc_cpu, cc_cpu = torch.zeros_like(k_ref), torch.zeros_like(c_ref)
    torch_npu.npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, kc_cpu, cc_cpu, k_rope_scale=k_scale,
                                        c_kv_scale=c_scale, cache_mode="PA_NZ")
    assert (kc_cpu.int() - k_ref.int()).abs().max() <= 1 and (cc_cpu.int() - c_ref.int()).abs().max() <= 1
    assert (kc_cpu != 0).sum() > 0
    assert torch.equal(kc_cpu, kc.cpu()) and torch.equal(cc_cpu, cc.cpu())
    assert k_rope.dtype == torch.bfloat16
    # V2 (with v): the whole of kv is normalised, rope on its first 32 features; v goes to ckv_cache.
    dk, dv = 48, 8
    kv2 = rnd(b, 1, s, dk, seed=33).bfloat16()
    g2 = rnd(dk, seed=34, lo=0.5, hi=1.5).bfloat16()
    v = rnd(b, 1, s, dv, seed=35).bfloat16()
    kcache, vcache = torch.zeros(blocks, bs, 1, dk).bfloat16(), torch.zeros(blocks, bs, 1, dv).bfloat16()
    k2, c2 = torch_npu.npu_kv_rmsnorm_rope_cache_v2(*on_npu(kv2, g2, cos, sin, index), kcache_n := kcache.npu(),
                                                    vcache_n := vcache.npu(), v=v.npu(), cache_mode="PA")
    assert k2.shape == (b, 1, s, dk) and c2.shape == (b, 1, s, dv)
    for j in range(s):
        y = rms_ref(kv2[0, 0, j], g2, 1e-5)
        want = torch.cat((rope_interleaved_ref(y[:rope], cos[0, 0, j], sin[0, 0, j]), y[rope:]))
        assert_close(k2[0, 0, j].cpu().double(), want, **BF16)
        put_token(kcache, int(index[j]), want.bfloat16(), False)
        put_token(vcache, int(index[j]), v[0, 0, j], False)
    assert_close(kcache_n.cpu(), kcache, **BF16)
    assert torch.equal(vcache_n.cpu(), vcache) and torch.equal(c2.cpu(), v[:, :, :, :])
    # the functional form leaves its caches alone and returns updated copies
    kz, vz = torch.zeros(blocks, bs, 1, dk).bfloat16(), torch.zeros(blocks, bs, 1, dv).bfloat16()
    fk, fc, fkc, fvc = torch_npu.npu_kv_rmsnorm_rope_cache_v2_functional(kv2, g2, cos, sin, index, kz, vz, v=v,
                                                                          cache_mode="PA")
    assert kz.abs().sum() == 0 and torch.equal(fkc, kcache_n.cpu()) and torch.equal(fvc, vcache_n.cpu())
    assert torch.equal(fk, k2.cpu())


@pytest.mark.parametrize("kwargs,match", [
    (dict(cache_mode="BAD"), "cache_mode should be one of"),
    (dict(k_rope_offset=torch.zeros(16)), "not supported on vNPU"),
    (dict(k_cache_dtype=2), "not supported on vNPU"),
    (dict(index=torch.tensor([0, 1, 2, 3, 4, 99])), "out of range"),
    (dict(index=torch.tensor([0, 1])), "batch_size \\* seq_len = 6 slots"),
    (dict(cos=torch.zeros(2, 1, 3, 8).half()), "should be gamma's 32 \\+ cos's 8"),
    (dict(k_cache=torch.zeros(3, 4, 1, 16, dtype=torch.int8)), "quantised cache; pass its scale"),
])
def test_kv_rmsnorm_rope_cache_bad_input(kwargs, match):
    kv, gamma, cos, sin = kv_inputs()
    args = dict(kv=kv, gamma=gamma, cos=cos, sin=sin, index=torch.arange(6), k_cache=torch.zeros(3, 4, 1, 16).half(),
                ckv_cache=torch.zeros(3, 4, 1, 32).half(), cache_mode="PA")
    args.update(kwargs)
    args["sin"] = args["cos"]
    with pytest.raises(RuntimeError, match=match):
        torch_npu.npu_kv_rmsnorm_rope_cache_v2(*[args.pop(n) for n in ("kv", "gamma", "cos", "sin", "index",
                                                                        "k_cache", "ckv_cache")], **args)


# --- npu_qkv_rms_norm_rope_cache -------------------------------------------------

def test_qkv_rms_norm_rope_cache_pa_nz_quantised():
    b, s, nq, nk, nv, d, blocks, bs, last = 2, 2, 2, 1, 1, 32, 3, 4, 32
    t = b * s
    qkv = rnd(t, (nq + nk + nv) * d, seed=40).half()
    q_gamma, k_gamma = rnd(d, seed=41, lo=0.5, hi=1.5).half(), rnd(d, seed=42, lo=0.5, hi=1.5).half()
    cos, sin = rnd(t, d, seed=43).half(), rnd(t, d, seed=44).half()
    index = torch.tensor([3, -1, 8, 0])
    k_scale, v_scale = rnd(nk, d, seed=45, lo=0.02, hi=0.05), rnd(nv, d, seed=46, lo=0.02, hi=0.05)
    k_offset = rnd(nk, d, seed=47)
    q_out = torch.zeros(t, nq * d).half()
    k_cache = torch.zeros(blocks, nk * d // last, bs, last, dtype=torch.int8)
    v_cache = torch.zeros(blocks, nv * d // last, bs, last, dtype=torch.int8)
    qn, kn, vn = q_out.npu(), k_cache.npu(), v_cache.npu()
    qb, kb, vb = torch_npu.npu_qkv_rms_norm_rope_cache(*on_npu(qkv, q_gamma, k_gamma, cos, sin, index), qn, kn, vn,
                                                       [b, s, nq + nk + nv, d], [nq, nk, nv], k_scale=k_scale.npu(),
                                                       v_scale=v_scale.npu(), k_offset=k_offset.npu(),
                                                       is_output_qkv=True)

    def rope(x, c, sn):
        half = x.shape[-1] // 2
        return x * c.double() + torch.cat((-x[half:], x[:half])) * sn.double()

    k_ref, v_ref = k_cache.clone(), v_cache.clone()
    for i in range(t):
        heads = qkv[i].view(nq + nk + nv, d)
        for h in range(nq):
            want = rope(rms_ref(heads[h], q_gamma, 1e-6), cos[i], sin[i])
            assert_close(qn[i, h * d:(h + 1) * d].cpu().double(), want, atol=5e-3, rtol=5e-3)
        k = rope(rms_ref(heads[nq], k_gamma, 1e-6), cos[i], sin[i])
        assert_close(kb[i].cpu().double(), k, atol=5e-3, rtol=5e-3)
        assert torch.equal(vb[i].cpu(), qkv[i, (nq + nk) * d:])
        if index[i] < 0:
            continue
        blk, off = divmod(int(index[i]), bs)
        kq = torch.round(k / k_scale[0].double() + k_offset[0].double()).clamp(-128, 127).to(torch.int8)
        vq = torch.round(heads[nq + nk].double() / v_scale[0].double()).clamp(-128, 127).to(torch.int8)
        for r in range(d // last):
            k_ref[blk, r, off] = kq[r * last:(r + 1) * last]
            v_ref[blk, r, off] = vq[r * last:(r + 1) * last]
    assert (kn.cpu().int() - k_ref.int()).abs().max() <= 1
    assert (vn.cpu().int() - v_ref.int()).abs().max() <= 1
    assert torch.equal(qb.cpu(), qn.cpu())
    # functional: same values, inputs untouched; without is_output_qkv the first three are empty
    outs = torch_npu.npu_qkv_rms_norm_rope_cache_functional(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache,
                                                            v_cache, [b, s, nq + nk + nv, d], [nq, nk, nv],
                                                            k_scale=k_scale, v_scale=v_scale, k_offset=k_offset)
    assert outs[0].shape == () and q_out.abs().sum() == 0
    assert torch.equal(outs[3], qn.cpu()) and torch.equal(outs[4], kn.cpu()) and torch.equal(outs[5], vn.cpu())


def test_qkv_rms_norm_rope_cache_bad_input():
    qkv = torch.zeros(4, 128).half()
    g = torch.ones(32).half()
    cs = torch.zeros(4, 32).half()
    caches = (torch.zeros(4, 32).half(), torch.zeros(2, 1, 4, 32).half(), torch.zeros(2, 1, 4, 32).half())
    with pytest.raises(RuntimeError, match="qkv should have shape"):
        torch_npu.npu_qkv_rms_norm_rope_cache(qkv, g, g, cs, cs, torch.arange(4), *caches, [2, 2, 5, 32], [2, 1, 1])
    with pytest.raises(RuntimeError, match="head_nums must be length 3"):
        torch_npu.npu_qkv_rms_norm_rope_cache(qkv, g, g, cs, cs, torch.arange(4), *caches, [2, 2, 4, 32], [2, 1])
    with pytest.raises(RuntimeError, match="cache_mode should be"):
        torch_npu.npu_qkv_rms_norm_rope_cache(qkv, g, g, cs, cs, torch.arange(4), *caches, [2, 2, 4, 32], [2, 1, 1],
                                              cache_mode="Norm")


# --- npu_scatter_pa_cache ---------------------------------------------------------

def test_scatter_pa_cache_writes_slots_and_returns_the_cache():
    key = rnd(5, 2, 8, seed=50).half()
    slots = torch.tensor([7, 0, -1, 3, 12])
    cache = torch.zeros(4, 4, 2, 8).half()
    cn = cache.npu()
    out = torch_npu.npu_scatter_pa_cache(key.npu(), slots.npu().int(), key_cache=cn)
    assert out is cn
    for i, slot in enumerate(slots.tolist()):
        if slot >= 0:
            cache[slot // 4, slot % 4] = key[i]
    assert torch.equal(cn.cpu(), cache)
    # vllm-ascend's MiniMax-M3 call: a (blocks, block_size, D) cache seen through unsqueeze(2)
    flat = torch.zeros(4, 4, 8).half()
    torch_npu.npu_scatter_pa_cache(key[:, :1], slots.clamp(min=0), key_cache=flat.unsqueeze(2))
    assert torch.equal(flat[1, 3], key[0, 0])
    with pytest.raises(RuntimeError, match="compressed cache modes"):
        torch_npu.npu_scatter_pa_cache(key, slots, seq_lens=torch.ones(1), key_cache=cache)


# --- npu_rope_quant_kvcache / npu_dequant_rope_quant_kvcache ------------------------

def rope_half_ref(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


@pytest.mark.parametrize("cache_mode", ["contiguous", "page"])
def test_rope_quant_kvcache(cache_mode):
    b, s, nq, nkv, d = 2, 2, 2, 1, 16
    x = rnd(b, s, (nq + 2 * nkv) * d, seed=60).half()
    cos, sin = rnd(b, s, 1, d, seed=61).half(), rnd(b, s, 1, d, seed=62).half()
    scale_k, scale_v = rnd(d, seed=63, lo=10, hi=30), rnd(d, seed=64, lo=10, hi=30)
    offset_k = rnd(d, seed=65)
    k_cache, v_cache = torch.zeros(b, 6, nkv, d, dtype=torch.int8), torch.zeros(b, 6, nkv, d, dtype=torch.int8)
    indices = torch.tensor([1, 4]) if cache_mode == "contiguous" else torch.tensor([0, 11, 7, 3])
    kn, vn = k_cache.npu(), v_cache.npu()
    q, k, v, kc, vc = torch_npu.npu_rope_quant_kvcache(*on_npu(x, cos, sin), kn, vn, indices.int().npu(),
                                                       scale_k.npu(), scale_v.npu(), [nq * d, nkv * d, nkv * d],
                                                       offset_k=offset_k.npu(), kv_output=True,
                                                       cache_mode=cache_mode)
    assert kc is kn and vc is vn and q.shape == (b, s, nq, d) and k.shape == (b, s, nkv, d)
    for i in range(b):
        for j in range(s):
            c, sn = cos[i, j, 0].double(), sin[i, j, 0].double()
            tok = x[i, j].double().view(nq + 2 * nkv, d)
            assert_close(q[i, j].cpu().double(), rope_half_ref(tok[:nq], c, sn), **F16)
            rk = rope_half_ref(tok[nq], c, sn)
            kq = torch.round(rk * scale_k.double() + offset_k.double()).clamp(-128, 127)
            vq = torch.round(tok[nq + 1] * scale_v.double()).clamp(-128, 127)
            if cache_mode == "contiguous":
                where = (i, int(indices[i]) + j)
            else:
                where = divmod(int(indices[i * s + j]), 6)
            assert (kn.cpu()[where][0].double() - kq).abs().max() <= 1
            assert (vn.cpu()[where][0].double() - vq).abs().max() <= 1
    written = (kn.cpu() != 0).any(-1).any(-1).sum()
    assert written <= b * s
    kc2, vc2 = k_cache.clone(), v_cache.clone()
    cpu = torch_npu.npu_rope_quant_kvcache(x, cos, sin, kc2, vc2, indices.int(), scale_k, scale_v,
                                           [nq * d, nkv * d, nkv * d], offset_k=offset_k, cache_mode=cache_mode)
    assert torch.equal(kc2, kn.cpu()) and torch.equal(vc2, vn.cpu()) and torch.equal(cpu[0], q.cpu())
    assert cpu[1].shape == (0,)


def test_dequant_rope_quant_kvcache():
    b, nq, nkv, d = 3, 1, 1, 16
    h = (nq + 2 * nkv) * d
    x = torch.randint(-50, 50, (b, h), generator=gen(70), dtype=torch.int32)
    weight_scale = rnd(h, seed=71, lo=0.01, hi=0.03)
    act = rnd(b, seed=72, lo=0.5, hi=1.5)
    bias = torch.randint(-5, 5, (h,), generator=gen(73), dtype=torch.int32)
    cos, sin = rnd(b, d, seed=74).half(), rnd(b, d, seed=75).half()
    scale = rnd(nkv, d, seed=76, lo=20, hi=40)
    kc, vc = torch.zeros(b, 4, nkv, d, dtype=torch.int8), torch.zeros(b, 4, nkv, d, dtype=torch.int8)
    q, k, v, _, _ = torch_npu.npu_dequant_rope_quant_kvcache(*on_npu(x, cos, sin, kc, vc), torch.tensor([0, 3, 2]).npu(),
                                                             scale.npu(), scale.npu(), [d, d, d],
                                                             weight_scale=weight_scale.npu(),
                                                             activation_scale=act.npu(), bias=bias.npu(),
                                                             kv_output=True)
    assert q.shape == (b, nq, d) and q.dtype == torch.float16
    deq = ((x.double() + bias.double()) * weight_scale.double() * act.double().unsqueeze(1)).half().double()
    for i in range(b):
        assert_close(q[i, 0].cpu().double(), rope_half_ref(deq[i, :d], cos[i].double(), sin[i].double()), **F16)
        assert_close(v[i, 0].cpu().double(), deq[i, 2 * d:], **F16)
    with pytest.raises(RuntimeError, match="x dtype should be Int32"):
        torch_npu.npu_dequant_rope_quant_kvcache(x.float(), cos, sin, kc, vc, torch.zeros(3).int(), scale, scale,
                                                 [d, d, d], weight_scale=weight_scale)
    with pytest.raises(RuntimeError, match="weight_scale is required"):
        torch_npu.npu_dequant_rope_quant_kvcache(x, cos, sin, kc, vc, torch.zeros(3).int(), scale, scale, [d, d, d])
    with pytest.raises(RuntimeError, match="indices .* should lie in"):
        torch_npu.npu_dequant_rope_quant_kvcache(x, cos, sin, kc, vc, torch.tensor([0, 9, 0]).int(), scale, scale,
                                                 [d, d, d], weight_scale=weight_scale)
    with pytest.raises(RuntimeError, match="size_splits"):
        torch_npu.npu_rope_quant_kvcache(x.half(), cos, sin, kc, vc, torch.zeros(3).int(), scale, scale, [d, d, 2 * d])


# --- gated delta rule ------------------------------------------------------------

def gdr_loop(q, k, v, state0, beta, g, gk, scale, heads_per_k):
    """One sequence, one value head at a time, token by token, in float64:
    S <- S * exp(g) [* exp(gk) per column]; S <- S + beta (v - S k) k^T; o = S (scale q).
    Returns the outputs and the state after every token."""
    t, nv, dv = v.shape
    out = torch.zeros(t, nv, dv, dtype=torch.float64)
    states = torch.zeros(t, nv, dv, k.shape[-1], dtype=torch.float64)
    for h in range(nv):
        s = state0[h].double().clone()
        for i in range(t):
            kk = k[i, h // heads_per_k].double()
            qq = q[i, h // heads_per_k].double() * scale
            s = s * math.exp(float(g[i, h]))
            if gk is not None:
                s = s * torch.exp(gk[i, h].double()).unsqueeze(0)
            s = s + float(beta[i, h]) * torch.outer(v[i, h].double() - s @ kk, kk)
            out[i, h] = s @ qq
            states[i, h] = s
    return out, states


def gdr_inputs(t, nk, nv, dk, dv, seed):
    q = torch.nn.functional.normalize(rnd(t, nk, dk, seed=seed), dim=-1).bfloat16()
    k = torch.nn.functional.normalize(rnd(t, nk, dk, seed=seed + 1), dim=-1).bfloat16()
    v = rnd(t, nv, dv, seed=seed + 2).bfloat16()
    beta = rnd(t, nv, seed=seed + 3, lo=0.1, hi=0.9).bfloat16()
    g = rnd(t, nv, seed=seed + 4, lo=-0.5, hi=0.0)
    return q, k, v, beta, g


def test_recurrent_gated_delta_rule_against_token_loop():
    lengths, accepted = [3, 1, 2], [2, 1, 1]
    t, nk, nv, dk, dv, slots = sum(lengths), 1, 2, 8, 4, 9
    q, k, v, beta, g = gdr_inputs(t, nk, nv, dk, dv, seed=80)
    gk = rnd(t, nv, dk, seed=85, lo=-0.2, hi=0.0)
    state = rnd(slots, nv, dv, dk, seed=86).bfloat16()
    indices = torch.tensor([8, 2, 5, 0, 7, 3], dtype=torch.int32)
    sn = state.npu()
    o = torch_npu.npu_recurrent_gated_delta_rule(*on_npu(q, k, v), sn, beta=beta.npu(), scale=0.3,
                                                 actual_seq_lengths=torch.tensor(lengths).int().npu(),
                                                 ssm_state_indices=indices.npu(),
                                                 num_accepted_tokens=torch.tensor(accepted).int().npu(), g=g.npu(),
                                                 gk=gk.npu())
    assert o.dtype == torch.bfloat16 and o.shape == (t, nv, dv)
    expect_state = state.clone()
    start = 0
    for n, a in zip(lengths, accepted):
        sl = slice(start, start + n)
        init = state[int(indices[start + a - 1])]
        out, states = gdr_loop(q[sl], k[sl], v[sl], init, beta[sl], g[sl], gk[sl], 0.3, nv // nk)
        assert_close(o[sl].cpu().double(), out, **BF16)
        for i in range(n):
            expect_state[int(indices[start + i])] = states[i].bfloat16()
        start += n
    assert_close(sn.cpu().double(), expect_state.double(), **BF16)
    # functional on cpu: same output and new state, input state untouched
    o2, s2 = torch_npu.npu_recurrent_gated_delta_rule_functional(
        q, k, v, state, beta=beta, scale=0.3, actual_seq_lengths=torch.tensor(lengths).int(),
        ssm_state_indices=indices, num_accepted_tokens=torch.tensor(accepted).int(), g=g, gk=gk)
    assert torch.equal(o2, o.cpu()) and torch.equal(s2, sn.cpu())
    assert not torch.equal(s2, state)


def test_recurrent_gated_delta_rule_defaults():
    # no lengths: every token its own sequence, state index = token index, scale = Dk^-0.5, no gates
    t, nk, nv, dk, dv = 3, 2, 2, 4, 4
    q, k, v, _, _ = gdr_inputs(t, nk, nv, dk, dv, seed=90)
    state = rnd(t, nv, dv, dk, seed=91).float()
    o, s = torch_npu.npu_recurrent_gated_delta_rule_functional(q, k, v, state)
    for i in range(t):
        out, states = gdr_loop(q[i:i + 1], k[i:i + 1], v[i:i + 1], state[i], torch.ones(1, nv), torch.zeros(1, nv),
                               None, dk ** -0.5, 1)
        assert_close(o[i].double(), out[0], **BF16)
        assert_close(s[i].double(), states[0], atol=1e-5, rtol=1e-5)


def test_recurrent_gated_delta_rule_bad_input():
    q, k, v, beta, g = gdr_inputs(4, 1, 2, 4, 4, seed=95)
    state = torch.zeros(4, 2, 4, 4).bfloat16()
    with pytest.raises(RuntimeError, match="adding up to T = 4"):
        torch_npu.npu_recurrent_gated_delta_rule(q, k, v, state, actual_seq_lengths=torch.tensor([1, 2]).int())
    with pytest.raises(RuntimeError, match="ssm_state_indices should lie in"):
        torch_npu.npu_recurrent_gated_delta_rule(q, k, v, state, ssm_state_indices=torch.tensor([0, 1, 2, 4]).int())
    with pytest.raises(RuntimeError, match="state should have shape"):
        torch_npu.npu_recurrent_gated_delta_rule(q, k, v, state[:, :1])
    with pytest.raises(RuntimeError, match="multiple of the key heads"):
        torch_npu.npu_recurrent_gated_delta_rule(q.expand(4, 3, 4), k.expand(4, 3, 4), v, state)


def test_chunk_gated_delta_rule_against_token_loop():
    lengths = [70, 5]  # two chunks for the first sequence
    t, nk, nv, dk, dv = sum(lengths), 1, 2, 8, 4
    q, k, v, beta, g = gdr_inputs(t, nk, nv, dk, dv, seed=100)
    init = rnd(len(lengths), nv, dv, dk, seed=101).bfloat16()
    o, final = torch_npu.npu_chunk_gated_delta_rule(*on_npu(q, k, v), beta=beta.npu(), initial_state=init.npu(),
                                                    actual_seq_lengths=torch.tensor(lengths).int().npu(),
                                                    scale=dk ** -0.5, g=g.npu())
    assert o.dtype == torch.bfloat16 and o.shape == (t, nv, dv)
    assert final.dtype == torch.bfloat16 and final.shape == init.shape
    start = 0
    for b, n in enumerate(lengths):
        sl = slice(start, start + n)
        out, states = gdr_loop(q[sl], k[sl], v[sl], init[b], beta[sl], g[sl], None, dk ** -0.5, nv // nk)
        assert_close(o[sl].cpu().double(), out, **BF16)
        assert_close(final[b].cpu().double(), states[-1], **BF16)
        start += n
    # float32 initial state gives a float32 final state; cpu equals npu; no g and scale default 1
    o32, f32 = torch_npu.npu_chunk_gated_delta_rule(q, k, v, beta=beta, initial_state=init.float(),
                                                    actual_seq_lengths=torch.tensor(lengths).int())
    out, states = gdr_loop(q[:70], k[:70], v[:70], init[0].float(), beta[:70], torch.zeros(70, nv), None, 1.0, 2)
    assert f32.dtype == torch.float32
    assert_close(f32[0].double(), states[-1], atol=1e-4, rtol=1e-4)
    assert_close(o32[:70].double(), out, **BF16)
    with pytest.raises(RuntimeError, match="initial_state and actual_seq_lengths are required"):
        torch_npu.npu_chunk_gated_delta_rule(q, k, v, beta=beta)
    with pytest.raises(RuntimeError, match="initial_state should have shape"):
        torch_npu.npu_chunk_gated_delta_rule(q, k, v, initial_state=init[:1],
                                             actual_seq_lengths=torch.tensor(lengths).int())


# --- causal conv1d -----------------------------------------------------------------

def conv_reference(x, w, states, starts, lines, computed=None, accepted=None, residual=False, pangu=False, pad=-1):
    """Per sequence, as op-plugin's formula: the left context from the state cache (zeros on a first chunk,
    rows up to accepted - 1 + K - 1 with speculative decoding, else all rows), then the taps."""
    taps, state_len = w.shape[0], states.shape[1]
    y = torch.zeros(x.shape, dtype=torch.float64)
    states = states.clone()
    for b in range(len(starts) - 1):
        xs = x[starts[b]:starts[b + 1]]
        line = lines[b]
        if line == pad:
            continue
        if computed is not None and computed[b] == 0:
            offset, cached = 0, torch.zeros(taps - 1, x.shape[1], dtype=x.dtype)
        elif accepted is not None:
            offset = accepted[b] - 1
            cached = states[line, :offset + taps - 1]
        else:
            offset, cached = state_len - (taps - 1), states[line]
        padded = torch.cat((cached, xs))
        m = min(state_len, padded.shape[0])
        states[line, state_len - m:] = padded[padded.shape[0] - m:]
        xp = padded[offset:].double()
        for i in range(xs.shape[0]):
            acc = sum(w[j].double() * xp[i + j] for j in range(taps))
            if pangu and i < min(max(taps - 1 - computed[b], 0), xs.shape[0]):
                acc = acc * 0
            y[starts[b] + i] = acc + (xs[i].double() if residual else 0)
    return y, states


def test_fused_causal_conv1d_prefill_and_spec_decode():
    dim, taps = 16, 3
    lengths = [5, 3, 4, 2]
    x = rnd(sum(lengths), dim, seed=110).half()
    w = rnd(taps, dim, seed=111).half()
    states = rnd(8, taps - 1 + 2, dim, seed=112).half()
    loc = [0, 5, 8, 12, 14]
    lines = [3, 0, 6, -1]  # the last batch is padding
    computed, accepted = [0, 10, 7, 4], [1, 2, 3, 1]
    sn = states.npu()
    y = torch_npu.npu_fused_causal_conv1d(x.npu(), w.npu(), sn, query_start_loc=torch.tensor(loc).int().npu(),
                                          cache_indices=torch.tensor(lines).int().npu(),
                                          num_accepted_tokens=torch.tensor(accepted).int().npu(),
                                          num_computed_tokens=torch.tensor(computed).int().npu(),
                                          residual_connection=1, max_query_len=5)
    y_ref, s_ref = conv_reference(x, w, states, loc, lines, computed, accepted, residual=True)
    assert y.dtype == torch.float16 and y.shape == x.shape
    assert_close(y.cpu().double(), y_ref, **F16)
    assert torch.equal(sn.cpu(), s_ref)
    # default case (no computed / accepted counts): all state rows are the left context; no cache_indices
    states2 = rnd(2, taps - 1, dim, seed=113).half()
    y2 = torch_npu.npu_fused_causal_conv1d(x[:8], w, s2 := states2.clone(), query_start_loc=torch.tensor([0, 5, 8]))
    y2_ref, s2_ref = conv_reference(x[:8], w, states2, [0, 5, 8], [0, 1])
    assert_close(y2.double(), y2_ref, **F16)
    assert torch.equal(s2, s2_ref)
    # 3-D decode batch, Pangu reset; _v2 writes into x
    x3 = rnd(2, 3, dim, seed=114).half()
    states3 = rnd(4, taps - 1 + 2, dim, seed=115).half()
    s3 = states3.clone()
    x3_inplace = x3.clone()
    torch_npu.npu_fused_causal_conv1d_v2(x3_inplace, w, s3, cache_indices=torch.tensor([2, 0]).int(),
                                         num_computed_tokens=torch.tensor([1, 30]).int(), conv_mode="pangu")
    y3_ref, s3_ref = conv_reference(x3.view(6, dim), w, states3, [0, 3, 6], [2, 0], computed=[1, 30], pangu=True)
    assert_close(x3_inplace.view(6, dim).double(), y3_ref, **F16)
    assert torch.equal(x3_inplace[0, 0], torch.zeros(dim).half())
    assert torch.equal(s3, s3_ref)
    # a padding batch (cache line == pad_slot_id) keeps its x and its state
    x4, s4 = x3.clone().npu(), states3.clone().npu()
    torch_npu.npu_fused_causal_conv1d_v2(x4, w.npu(), s4, cache_indices=torch.tensor([-1, 1]).int().npu())
    y4_ref, s4_ref = conv_reference(x3.view(6, dim), w, states3, [0, 3, 6], [-1, 1])
    assert torch.equal(x4[0].cpu(), x3[0])
    assert_close(x4[1].cpu().double(), y4_ref[3:], **F16)
    assert torch.equal(s4.cpu(), s4_ref)


def test_fused_causal_conv1d_prefix_caching_block_states():
    # APC: cache_indices (batch, blocks); the state at each full block boundary goes to that block's line
    dim, taps, bs = 8, 3, 4
    x = rnd(10, dim, seed=120).half()
    w = rnd(taps, dim, seed=121).half()
    states = rnd(6, taps - 1, dim, seed=122).half()
    sn = states.clone()
    y = torch_npu.npu_fused_causal_conv1d(x, w, sn, query_start_loc=torch.tensor([0, 10]).int(),
                                          cache_indices=torch.tensor([[5, 1, 2, 3]]).int(),
                                          num_computed_tokens=torch.tensor([2]).int(),
                                          block_idx_first_scheduled_token=torch.tensor([0]).int(),
                                          block_idx_last_scheduled_token=torch.tensor([2]).int(),
                                          initial_state_idx=torch.tensor([0]).int(), block_size=bs)
    # 2 tokens were computed, so this chunk covers positions 2..11: blocks 0, 1 close after chunk tokens 1 and 5,
    # block 2 holds the end. The initial state comes from block 0's line (5), read before it is rewritten.
    full = torch.cat((states[5], x))
    y_ref = torch.stack([sum(w[j].double() * full[i + j].double() for j in range(taps)) for i in range(10)])
    assert_close(y.double(), y_ref, **F16)
    assert torch.equal(sn[5], x[0:2])  # state at the end of block 0 (positions 2, 3)
    assert torch.equal(sn[1], x[4:6])  # end of block 1 (positions 6, 7)
    assert torch.equal(sn[2], x[8:10])  # the last scheduled block: the final state
    assert torch.equal(sn[3], states[3]) and torch.equal(sn[0], states[0])


def test_fused_causal_conv1d_bad_input():
    x, w, s = torch.zeros(4, 8).half(), torch.zeros(3, 8).half(), torch.zeros(2, 2, 8).half()
    with pytest.raises(RuntimeError, match="query_start_loc is required"):
        torch_npu.npu_fused_causal_conv1d(x, w, s)
    with pytest.raises(RuntimeError, match="weight should have shape"):
        torch_npu.npu_fused_causal_conv1d(x, w[:, :4], s, query_start_loc=torch.tensor([0, 4]))
    with pytest.raises(RuntimeError, match="conv_mode should be"):
        torch_npu.npu_fused_causal_conv1d(x, w, s, query_start_loc=torch.tensor([0, 4]), conv_mode="mamba")
    with pytest.raises(RuntimeError, match="needs num_computed_tokens"):
        torch_npu.npu_fused_causal_conv1d(x, w, s, query_start_loc=torch.tensor([0, 4]), conv_mode="pangu")
    with pytest.raises(RuntimeError, match="out of range"):
        torch_npu.npu_fused_causal_conv1d(x, w, s, query_start_loc=torch.tensor([0, 4]),
                                          cache_indices=torch.tensor([5]))


def masked_conv_ref(x, w, mask):
    seq, batch, _ = x.shape
    out = torch.zeros(x.shape, dtype=torch.float64)
    for s in range(seq):
        for k in range(w.shape[0]):
            src = s - (w.shape[0] - 1 - k)
            if src >= 0:
                out[s] += w[k].double() * x[src].double()
        for b in range(batch):
            if mask is not None and not mask[b, s]:
                out[s, b] = 0
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_masked_causal_conv1d_and_backward(dtype):
    x = rnd(6, 2, 8, seed=130).to(dtype)
    w = rnd(3, 8, seed=131).to(dtype)
    mask = torch.rand(2, 6, generator=gen(132)) > 0.3
    y = torch_npu.npu_masked_causal_conv1d(x.npu(), w.npu(), mask=mask.npu())
    tol = F16 if dtype == torch.float16 else BF16
    assert y.dtype == dtype and y.shape == x.shape
    assert_close(y.cpu().double(), masked_conv_ref(x, w, mask), **tol)
    assert torch.equal(torch_npu.npu_masked_causal_conv1d(x, w, mask=mask), y.cpu())
    # backward op against autograd through the float32 composition
    go = rnd(6, 2, 8, seed=133).to(dtype)
    gi, gw = torch_npu.npu_masked_causal_conv1d_backward(go.npu(), x.npu(), w.npu(), mask=mask.npu())
    xf, wf = x.float().requires_grad_(), w.float().requires_grad_()
    torch.autograd.backward(torch_npu.npu_masked_causal_conv1d(xf, wf, mask=mask), go.float())
    assert gi.dtype == dtype and gw.shape == w.shape
    assert_close(gi.cpu().float(), xf.grad, **tol)
    assert_close(gw.cpu().float(), wf.grad, atol=5e-2, rtol=2e-2)


def test_masked_causal_conv1d_gradients_and_errors():
    """The backward op and autograd against the transposed convolution, written as loops."""
    x, w = rnd(5, 2, 4, seed=134), rnd(3, 4, seed=135)
    mask = torch.tensor([[1, 1, 0, 1, 1], [0, 1, 1, 1, 0]], dtype=torch.bool)
    go = rnd(5, 2, 4, seed=136)
    g = go.double() * mask.t().unsqueeze(-1)
    gi_ref, gw_ref = torch.zeros(5, 2, 4, dtype=torch.float64), torch.zeros(3, 4, dtype=torch.float64)
    for s in range(5):
        for k in range(3):
            src = s - (2 - k)
            if src >= 0:
                gi_ref[src] += w[k].double() * g[s]
                gw_ref[k] += (g[s] * x[src].double()).sum(0)
    gi, gw = torch_npu.npu_masked_causal_conv1d_backward(go.npu(), x.npu(), w.npu(), mask=mask.npu())
    assert_close(gi.cpu().double(), gi_ref, atol=1e-5, rtol=1e-5)
    assert_close(gw.cpu().double(), gw_ref, atol=1e-5, rtol=1e-5)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    torch.autograd.backward(torch_npu.npu_masked_causal_conv1d(xg, wg, mask=mask), go)
    assert_close(xg.grad.double(), gi_ref, atol=1e-5, rtol=1e-5)
    assert_close(wg.grad.double(), gw_ref, atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="mask should be a bool tensor"):
        torch_npu.npu_masked_causal_conv1d(x, w, mask=torch.ones(5, 2, dtype=torch.bool))
    with pytest.raises(RuntimeError, match="weight should have shape"):
        torch_npu.npu_masked_causal_conv1d(x, w[:, :2])


# --- npu_top_k_top_p_sample ----------------------------------------------------------

def sample_ref(logits, k, p, q, min_p, input_is_logits, post, ks_max=1024, eps=1e-8):
    """Row by row after op-plugin's reference: sort, top-k, probabilities, top-p, min-p, then sample."""
    k_max = min((ks_max + 7) // 8 * 8, 1024)
    picks, selects = [], []
    for r in range(logits.shape[0]):
        row = logits[r].double()
        vocab = row.shape[0]
        use_k = 1 <= int(k[r]) <= min(k_max, vocab)
        pr = float(p[r])
        use_p = pr < 1
        mp = -1.0 if min_p is None else float(min_p[r])
        vals, idx = torch.sort(row, descending=True, stable=True)
        if use_k:
            vals, idx = vals[:int(k[r])], idx[:int(k[r])]
        probs = torch.softmax(vals, 0) if input_is_logits else vals
        if use_p:
            if pr > 0:
                before = torch.cumsum(probs, 0) - probs
                sel = before < pr
            else:
                sel = torch.arange(len(probs)) == 0
            probs, idx = probs[sel], idx[sel]
        if pr <= 0 and input_is_logits:
            probs = probs.clone()
            probs[0] = 1
        if not use_k and not use_p and mp < 1:
            idx = torch.arange(vocab)
            probs = torch.softmax(row, 0) if input_is_logits else row
        if 0 < mp < 1:
            sel = probs >= probs.max() * mp
            probs, idx = probs[sel], idx[sel]
        elif mp >= 1:
            probs, idx = probs[:1], idx[:1]
        if post == "qSample":
            score = probs / (q[r, :len(probs)].double().abs() + eps)
        else:
            score = probs
        picks.append(int(idx[int(torch.argmax(score))]))
        select = torch.full((vocab,), float("-inf") if input_is_logits else 0.0, dtype=torch.float64)
        select[idx] = row[idx]
        selects.append(select)
    return torch.tensor(picks), torch.stack(selects)


@pytest.mark.parametrize("case", [
    dict(k=[3, 2000, 5, 2000], p=[0.6, 0.5, 1.0, 1.0], min_p=None, post="qSample", logits=True),
    dict(k=[4, 1, 2000, 6], p=[0.0, 0.9, 0.7, 0.95], min_p=[0.3, 0.0, 0.5, 1.5], post="None", logits=True),
    dict(k=[2000, 2000, 3, 2000], p=[1.0, 1.0, 0.8, 1.0], min_p=[0.2, 0.0, 0.1, 0.5], post="qSample", logits=False),
])
def test_top_k_top_p_sample(case):
    batch, vocab = 4, 12
    logits = rnd(batch, vocab, seed=140) * 2
    if not case["logits"]:
        logits = logits.softmax(-1)
    k = torch.tensor(case["k"], dtype=torch.int32)
    p = torch.tensor(case["p"])
    q = rnd(batch, vocab, seed=141, lo=0.05, hi=1.0)
    min_p = None if case["min_p"] is None else torch.tensor(case["min_p"])
    idx, select = torch_npu.npu_top_k_top_p_sample(*on_npu(logits, k, p), q=q.npu(),
                                                   min_ps=None if min_p is None else min_p.npu(),
                                                   is_need_logits=True, input_is_logits=case["logits"],
                                                   post_sample=case["post"])
    want_idx, want_select = sample_ref(logits, k, p, q, min_p, case["logits"], case["post"])
    assert idx.dtype == torch.int64 and idx.shape == (batch,) and select.dtype == torch.float32
    assert torch.equal(idx.cpu(), want_idx)
    assert_close(select.cpu().double(), want_select)
    cpu_idx, _ = torch_npu.npu_top_k_top_p_sample(logits, k, p, q=q, min_ps=min_p, input_is_logits=case["logits"],
                                                  post_sample=case["post"])
    assert torch.equal(cpu_idx, want_idx)


def test_top_k_top_p_sample_multinomial_and_errors():
    logits = rnd(3, 10, seed=150)
    k = torch.tensor([1, 1, 1], dtype=torch.int32)  # one token left: the draw is certain
    p = torch.ones(3)
    gen_ = torch.Generator().manual_seed(0)
    idx, _ = torch_npu.npu_top_k_top_p_sample(logits, k, p, post_sample="multiNomial", generator=gen_)
    assert torch.equal(idx, logits.argmax(-1))
    draws = {int(torch_npu.npu_top_k_top_p_sample(logits[:1], torch.tensor([3], dtype=torch.int32), torch.ones(1),
                                                  post_sample="multiNomial")[0]) for _ in range(30)}
    assert draws <= set(logits[0].topk(3).indices.tolist())
    with pytest.raises(RuntimeError, match="post_sample should be"):
        torch_npu.npu_top_k_top_p_sample(logits, k, p, post_sample="greedy")
    with pytest.raises(RuntimeError, match="top_k should be a 1-D int32 tensor"):
        torch_npu.npu_top_k_top_p_sample(logits, k.float(), p)
    with pytest.raises(RuntimeError, match="q should be a float32 tensor"):
        torch_npu.npu_top_k_top_p_sample(logits, k, p, q=torch.ones(3, 4))


# --- npu_advance_step_flashattn --------------------------------------------------------

def test_advance_step_flashattn_plain():
    num_seqs, num_queries, bs = 5, 3, 4
    tokens = torch.arange(10, 15)
    sampled = torch.tensor([[21], [22], [23]])
    positions = torch.zeros(5, dtype=torch.long)
    seq_lens = torch.tensor([3, 8, 1, 6, 6])
    slots = torch.zeros(5, dtype=torch.long)
    tables = torch.randint(0, 50, (5, 4), generator=gen(160))
    t, pos, sl, sm = on_npu(tokens.clone(), positions.clone(), seq_lens.clone(), slots.clone())
    torch_npu.npu_advance_step_flashattn(t, sampled.npu(), pos, sl, sm, tables.npu(), num_seqs, num_queries, bs)
    for i in range(num_queries):
        assert t[i].item() == sampled[i, 0] and pos[i].item() == seq_lens[i] and sl[i].item() == seq_lens[i] + 1
        p = int(seq_lens[i])
        assert sm[i].item() == tables[i, p // bs] * bs + p % bs
    assert t.cpu()[3:].tolist() == [0, 0] and pos.cpu()[3:].tolist() == [0, 0] and sm.cpu()[3:].tolist() == [-1, -1]
    assert sl.cpu()[3:].tolist() == [6, 6]


def test_advance_step_flashattn_speculative():
    num_seqs, spec, bs = 2, 2, 4
    per = spec + 1
    tokens = torch.zeros(num_seqs * per, dtype=torch.long)
    sampled = torch.tensor([[5, 6, -1], [7, 8, 9]])
    spec_token = torch.tensor([[31, 32], [41, 42]])
    accepted = torch.tensor([1, 2])
    positions = torch.tensor([4, 5, 6, 9, 10, 11])
    seq_lens = torch.zeros(6, dtype=torch.long)
    slots = torch.zeros(6, dtype=torch.long)
    tables = torch.randint(0, 50, (2, 8), generator=gen(161))
    torch_npu.npu_advance_step_flashattn(tokens, sampled, positions, seq_lens, slots, tables, num_seqs, num_seqs, bs,
                                         spec_token=spec_token, accepted_num=accepted)
    assert tokens.tolist() == [6, 31, 32, 9, 41, 42]
    assert positions.tolist() == [6, 7, 8, 12, 13, 14]
    assert seq_lens.tolist() == [7, 8, 9, 13, 14, 15]
    want = [int(tables[i // per, p // bs] * bs + p % bs) for i, p in enumerate(positions.tolist())]
    assert slots.tolist() == want
    with pytest.raises(RuntimeError, match="accepted_num is required"):
        torch_npu.npu_advance_step_flashattn(tokens, sampled, positions, seq_lens, slots, tables, 2, 2, bs,
                                             spec_token=spec_token)
    with pytest.raises(RuntimeError, match="should not be less than num_queries"):
        torch_npu.npu_advance_step_flashattn(tokens[:2], sampled, positions[:2], seq_lens[:2], slots[:2], tables, 2,
                                             3, bs)


# --- npu_ring_attention_update ----------------------------------------------------------

def ring_ref(o1, m1, l1, o2, m2, l2):
    m = torch.maximum(m1, m2)
    a1, a2 = l1 * torch.exp(m1 - m), l2 * torch.exp(m2 - m)
    return (o1 * a1 + o2 * a2) / (a1 + a2), m, a1 + a2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_ring_attention_update_sbh_and_tnd(dtype):
    s, b, n, d = 3, 2, 2, 4
    o1, o2 = rnd(s, b, n * d, seed=170).to(dtype), rnd(s, b, n * d, seed=171).to(dtype)
    stats = [rnd(b, n, s, 1, seed=172 + i, lo=0.2, hi=2.0).expand(b, n, s, 8).contiguous() for i in range(4)]
    out, m, l = torch_npu.npu_ring_attention_update(*on_npu(o1, stats[0], stats[1], o2, stats[2], stats[3]))
    tol = {torch.float16: F16, torch.bfloat16: BF16, torch.float32: dict(atol=1e-5, rtol=1e-5)}[dtype]
    for si in range(s):
        for bi in range(b):
            for h in range(n):
                st = [x[bi, h, si, 0].double() for x in stats]
                want, wm, wl = ring_ref(o1[si, bi, h * d:(h + 1) * d].double(), st[0], st[1],
                                        o2[si, bi, h * d:(h + 1) * d].double(), st[2], st[3])
                assert_close(out[si, bi, h * d:(h + 1) * d].cpu().double(), want, **tol)
                assert_close(m[bi, h, si].cpu().double(), wm.expand(8), atol=1e-6, rtol=1e-6)
                assert_close(l[bi, h, si].cpu().double(), wl.expand(8), atol=1e-5, rtol=1e-5)
    assert out.dtype == dtype and m.shape == (b, n, s, 8)
    # TND, softmax in TND layout (T, N, 8) or in the BNS8 layout (N, T, 8)
    t = 5
    a1, a2 = rnd(t, n, d, seed=180).to(dtype), rnd(t, n, d, seed=181).to(dtype)
    st = [rnd(t, n, 1, seed=182 + i, lo=0.2, hi=2.0).expand(t, n, 8).contiguous() for i in range(4)]
    qlen = torch.tensor([2, 5])
    out_t, _, _ = torch_npu.npu_ring_attention_update(a1, st[0], st[1], a2, st[2], st[3], actual_seq_qlen=qlen,
                                                      input_layout="TND", input_softmax_layout="TND")
    want = ring_ref(a1.double(), st[0][..., :1].double(), st[1][..., :1].double(), a2.double(),
                    st[2][..., :1].double(), st[3][..., :1].double())[0]
    assert_close(out_t.double(), want, **tol)
    bns = [x.transpose(0, 1).contiguous() for x in st]
    out_b, m_b, _ = torch_npu.npu_ring_attention_update(a1, bns[0], bns[1], a2, bns[2], bns[3], actual_seq_qlen=qlen,
                                                        input_layout="TND")
    assert_close(out_b, out_t) and m_b.shape == (n, t, 8)


def test_ring_attention_update_bad_input():
    o = torch.zeros(3, 2, 8)
    st = torch.ones(2, 2, 3, 8)
    with pytest.raises(RuntimeError, match="input_layout only supports"):
        torch_npu.npu_ring_attention_update(o, st, st, o, st, st, input_layout="BSH")
    with pytest.raises(RuntimeError, match="softmax tensors must use float32"):
        torch_npu.npu_ring_attention_update(o, st, st, o, st.half(), st)
    with pytest.raises(RuntimeError, match="last dimension to be 8"):
        torch_npu.npu_ring_attention_update(o, st[..., :4], st[..., :4], o, st[..., :4], st[..., :4])
    with pytest.raises(RuntimeError, match="actual_seq_qlen is required"):
        torch_npu.npu_ring_attention_update(o, st[0], st[0], o, st[0], st[0], input_layout="TND")


# --- tracing ------------------------------------------------------------------------------

def test_fake_tensor_shapes():
    with FakeTensorMode():
        y = torch.ops.npu.npu_masked_causal_conv1d(torch.empty(7, 2, 16, dtype=torch.bfloat16),
                                                   torch.empty(3, 16, dtype=torch.bfloat16),
                                                   mask=torch.empty(2, 7, dtype=torch.bool))
        assert y.shape == (7, 2, 16) and y.dtype == torch.bfloat16
        gi, gw = torch.ops.npu.npu_masked_causal_conv1d_backward(torch.empty(7, 2, 16).half(),
                                                                 torch.empty(7, 2, 16).half(),
                                                                 torch.empty(3, 16).half())
        assert gi.shape == (7, 2, 16) and gw.shape == (3, 16)
        st = torch.empty(2, 4, 3, 8)
        o, m, l = torch.ops.npu.npu_ring_attention_update(torch.empty(3, 2, 64).half(), st, st,
                                                          torch.empty(3, 2, 64).half(), st, st)
        assert o.shape == (3, 2, 64) and m.shape == (2, 4, 3, 8) and o.dtype == torch.float16
        idx, sel = torch.ops.npu.npu_top_k_top_p_sample(torch.empty(4, 32), torch.empty(4, dtype=torch.int32),
                                                        torch.empty(4), q=torch.empty(4, 32))
        assert idx.shape == (4,) and idx.dtype == torch.int64 and sel.shape == (4, 32) and sel.dtype == torch.float32


def test_compile_eager_backend():
    def f(x, w, mask, o1, st):
        y = torch_npu.npu_masked_causal_conv1d(x, w, mask=mask)
        out, _, _ = torch_npu.npu_ring_attention_update(o1, st, st, y.view(3, 2, 8), st, st)
        return out

    x, w = rnd(3, 2, 8, seed=190).half().npu(), rnd(3, 8, seed=191).half().npu()
    mask = torch.ones(2, 3, dtype=torch.bool).npu()
    o1, st = rnd(3, 2, 8, seed=192).half().npu(), torch.ones(2, 2, 3, 8).npu()
    assert_close(torch.compile(f, backend="eager")(x, w, mask, o1, st).cpu(), f(x, w, mask, o1, st).cpu())
