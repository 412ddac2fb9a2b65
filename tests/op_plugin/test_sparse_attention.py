"""torch_npu.op_plugin.sparse_attention: DeepSeek-V3.2's lightning indexer (+ quantised, grad and
the KL losses), sparse flash attention (+ grad, + the packed kv-quant cache), MLA prolog v1/v2/v3,
block sparse attention (+ backward) and NSA (compress, compressed / selected attention) against
references written token by token and head by head on cpu in float64; npu against cpu; schemas;
argument errors; FakeTensor / torch.compile tracing."""

import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import rnd

NPU = torch.ops.npu
NEG = float("-inf")

SCHEMAS = [
    "npu_lightning_indexer(Tensor query, Tensor key, Tensor weights, *, "
    "Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_key=None, "
    "Tensor? block_table=None, str layout_query=\"BSND\", str layout_key=\"BSND\", "
    "int sparse_count=2048, int sparse_mode=3, int pre_tokens=9223372036854775807, "
    "int next_tokens=9223372036854775807, bool return_value=False) -> (Tensor, Tensor)",
    "npu_quant_lightning_indexer(Tensor query, Tensor key, Tensor weights, "
    "Tensor query_dequant_scale, Tensor key_dequant_scale, int query_quant_mode, int key_quant_mode, "
    "*, Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_key=None, "
    "Tensor? block_table=None, str layout_query=\"BSND\", str layout_key=\"BSND\", "
    "int sparse_count=2048, int sparse_mode=3, int pre_tokens=9223372036854775807, "
    "int next_tokens=9223372036854775807, int? query_dtype=None, int? key_dtype=None) -> Tensor",
    "npu_lightning_indexer_grad(Tensor query, Tensor key, Tensor dy, Tensor sparse_indices, "
    "Tensor weights, Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_key=None, "
    "str? layout=\"BSND\", int? sparse_mode=3, int? pre_tokens=9223372036854775807, "
    "int? next_tokens=9223372036854775807) -> (Tensor, Tensor, Tensor)",
    "npu_dense_lightning_indexer_softmax_lse(Tensor query_index, Tensor key_index, Tensor weights, "
    "*, SymInt[]? actual_seq_qlen=None, SymInt[]? actual_seq_klen=None, str? layout='BSND', "
    "int? sparse_mode=3, int? pre_tokens=9223372036854775807, "
    "int? next_tokens=9223372036854775807) -> (Tensor, Tensor)",
    "npu_dense_lightning_indexer_grad_kl_loss(Tensor query, Tensor key, Tensor query_index, "
    "Tensor key_index, Tensor weights, Tensor softmax_max, Tensor softmax_sum, "
    "Tensor softmax_max_index, Tensor softmax_sum_index, float scale_value, *, "
    "Tensor? query_rope=None, Tensor? key_rope=None, SymInt[]? actual_seq_qlen=None, "
    "SymInt[]? actual_seq_klen=None, str? layout='BSND', int? sparse_mode=3, "
    "int? pre_tokens=9223372036854775807, int? next_tokens=9223372036854775807) -> (Tensor, Tensor, "
    "Tensor, Tensor)",
    "npu_sparse_lightning_indexer_grad_kl_loss(Tensor query, Tensor key, Tensor query_index, "
    "Tensor key_index, Tensor weights, Tensor sparse_indices, Tensor softmax_max, "
    "Tensor softmax_sum, float scale_value, *, Tensor? query_rope=None, Tensor? key_rope=None, "
    "SymInt[]? actual_seq_qlen=None, SymInt[]? actual_seq_klen=None, str? layout='BSND', "
    "int? sparse_mode=3, int? pre_tokens=9223372036854775807, int? next_tokens=9223372036854775807, "
    "Tensor? sinks=None) -> (Tensor, Tensor, Tensor, Tensor)",
    "npu_sparse_flash_attention(Tensor query, Tensor key, Tensor value, Tensor sparse_indices, "
    "float scale_value, *, Tensor? block_table=None, Tensor? actual_seq_lengths_query=None, "
    "Tensor? actual_seq_lengths_kv=None, Tensor? query_rope=None, Tensor? key_rope=None, "
    "int sparse_block_size=1, str layout_query=\"BSND\", str layout_kv=\"BSND\", int sparse_mode=3, "
    "int pre_tokens=9223372036854775807, int next_tokens=9223372036854775807, int attention_mode=0, "
    "bool return_softmax_lse=False, Tensor? sinks=None) -> (Tensor, Tensor, Tensor)",
    "npu_sparse_flash_attention_grad(Tensor query, Tensor key, Tensor value, Tensor sparse_indices, "
    "Tensor d_out, Tensor out, Tensor softmax_max, Tensor softmax_sum, float scale_value, "
    "int sparse_block_size, Tensor? query_rope=None, Tensor? key_rope=None, "
    "Tensor? actual_seq_qlen=None, Tensor? actual_seq_kvlen=None, str? layout=\"BSND\", "
    "int? sparse_mode=3, int? pre_tokens=9223372036854775807, int? next_tokens=9223372036854775807, "
    "int? attention_mode=0) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "npu_kv_quant_sparse_flash_attention(Tensor query, Tensor key, Tensor value, "
    "Tensor sparse_indices, float scale_value, int key_quant_mode, int value_quant_mode, *, "
    "Tensor? key_dequant_scale=None, Tensor? value_dequant_scale=None, Tensor? block_table=None, "
    "Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_kv=None, "
    "int sparse_block_size=1, str layout_query=\"BSND\", str layout_kv=\"BSND\", int sparse_mode=3, "
    "int pre_tokens=9223372036854775807, int next_tokens=9223372036854775807, int attention_mode=0, "
    "int quant_scale_repo_mode=1, int tile_size=128, int rope_head_dim=64, int? key_dtype=None, "
    "int? value_dtype=None, Tensor? sinks=None) -> Tensor",
    "npu_mla_prolog(Tensor token_x, Tensor weight_dq, Tensor weight_uq_qr, Tensor weight_uk, "
    "Tensor weight_dkv_kr, Tensor rmsnorm_gamma_cq, Tensor rmsnorm_gamma_ckv, Tensor rope_sin, "
    "Tensor rope_cos, Tensor cache_index, Tensor kv_cache, Tensor kr_cache, *, "
    "Tensor? dequant_scale_x=None, Tensor? dequant_scale_w_dq=None, "
    "Tensor? dequant_scale_w_uq_qr=None, Tensor? dequant_scale_w_dkv_kr=None, "
    "Tensor? quant_scale_ckv=None, Tensor? quant_scale_ckr=None, Tensor? smooth_scales_cq=None, "
    "float rmsnorm_epsilon_cq=1e-05, float rmsnorm_epsilon_ckv=1e-05, "
    "str cache_mode=\"PA_BSND\") -> (Tensor, Tensor, Tensor, Tensor)",
    "npu_mla_prolog_v2(Tensor token_x, Tensor weight_dq, Tensor weight_uq_qr, Tensor weight_uk, "
    "Tensor weight_dkv_kr, Tensor rmsnorm_gamma_cq, Tensor rmsnorm_gamma_ckv, Tensor rope_sin, "
    "Tensor rope_cos, Tensor cache_index, Tensor kv_cache, Tensor kr_cache, *, "
    "Tensor? dequant_scale_x=None, Tensor? dequant_scale_w_dq=None, "
    "Tensor? dequant_scale_w_uq_qr=None, Tensor? dequant_scale_w_dkv_kr=None, "
    "Tensor? quant_scale_ckv=None, Tensor? quant_scale_ckr=None, Tensor? smooth_scales_cq=None, "
    "float rmsnorm_epsilon_cq=1e-05, float rmsnorm_epsilon_ckv=1e-05, "
    "str cache_mode=\"PA_BSND\") -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "npu_mla_prolog_v3(Tensor token_x, Tensor weight_dq, Tensor weight_uq_qr, Tensor weight_uk, "
    "Tensor weight_dkv_kr, Tensor rmsnorm_gamma_cq, Tensor rmsnorm_gamma_ckv, Tensor rope_sin, "
    "Tensor rope_cos, Tensor(a!) kv_cache, Tensor(b!) kr_cache, *, Tensor? cache_index=None, "
    "Tensor? dequant_scale_x=None, Tensor? dequant_scale_w_dq=None, "
    "Tensor? dequant_scale_w_uq_qr=None, Tensor? dequant_scale_w_dkv_kr=None, "
    "Tensor? quant_scale_ckv=None, Tensor? quant_scale_ckr=None, Tensor? smooth_scales_cq=None, "
    "Tensor? actual_seq_len=None, Tensor? k_nope_clip_alpha=None, float rmsnorm_epsilon_cq=1e-05, "
    "float rmsnorm_epsilon_ckv=1e-05, str cache_mode=\"PA_BSND\", bool query_norm_flag=False, "
    "int weight_quant_mode=0, int kv_cache_quant_mode=0, int query_quant_mode=0, "
    "int ckvkr_repo_mode=0, int quant_scale_repo_mode=0, int tile_size=128, float qc_qr_scale=1.0, "
    "float kc_scale=1.0, int? token_x_dtype=None, int? weight_dq_dtype=None, "
    "int? weight_uq_qr_dtype=None, int? weight_dkv_kr_dtype=None, "
    "int? kv_cache_dtype=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "npu_mla_prolog_v3_functional(Tensor token_x, Tensor weight_dq, Tensor weight_uq_qr, "
    "Tensor weight_uk, Tensor weight_dkv_kr, Tensor rmsnorm_gamma_cq, Tensor rmsnorm_gamma_ckv, "
    "Tensor rope_sin, Tensor rope_cos, Tensor kv_cache, Tensor kr_cache, *, "
    "Tensor? cache_index=None, Tensor? dequant_scale_x=None, Tensor? dequant_scale_w_dq=None, "
    "Tensor? dequant_scale_w_uq_qr=None, Tensor? dequant_scale_w_dkv_kr=None, "
    "Tensor? quant_scale_ckv=None, Tensor? quant_scale_ckr=None, Tensor? smooth_scales_cq=None, "
    "Tensor? actual_seq_len=None, Tensor? k_nope_clip_alpha=None, float rmsnorm_epsilon_cq=1e-05, "
    "float rmsnorm_epsilon_ckv=1e-05, str cache_mode=\"PA_BSND\", bool query_norm_flag=False, "
    "int weight_quant_mode=0, int kv_cache_quant_mode=0, int query_quant_mode=0, "
    "int ckvkr_repo_mode=0, int quant_scale_repo_mode=0, int tile_size=128, float qc_qr_scale=1.0, "
    "float kc_scale=1.0, int? token_x_dtype=None, int? weight_dq_dtype=None, "
    "int? weight_uq_qr_dtype=None, int? weight_dkv_kr_dtype=None, "
    "int? kv_cache_dtype=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    "npu_block_sparse_attention(Tensor query, Tensor key, Tensor value, Tensor block_sparse_mask, "
    "int[] block_shape, *, str q_input_layout='TND', str kv_input_layout='TND', "
    "int num_key_value_heads=1, float scale_value=0.0, int inner_precise=1, "
    "int[]? actual_seq_lengths=None, int[]? actual_seq_lengths_kv=None, "
    "int? softmax_lse_flag=0) -> (Tensor, Tensor)",
    "npu_block_sparse_attention_backward(Tensor d_out, Tensor query, Tensor key, Tensor value, "
    "Tensor attention_out, Tensor softmax_lse, Tensor block_sparse_mask, int[]? block_shape, "
    "int[]? actual_seq_lengths, int[]? actual_seq_lengths_kv, str q_input_layout, "
    "str kv_input_layout, int num_key_value_heads, float scale_value) -> (Tensor, Tensor, Tensor)",
    "npu_nsa_compress(Tensor input, Tensor weight, int compress_block_size, int compress_stride, *, "
    "int[]? actual_seq_len=None) -> Tensor",
    "npu_nsa_compress_grad(Tensor grad, Tensor input, Tensor weight, int compress_block_size, "
    "int compress_stride, *, int[]? actual_seq_len=None) -> (Tensor, Tensor)",
    "npu_nsa_compress_attention(Tensor query, Tensor key, Tensor value, float scale_value, "
    "int head_num, int compress_block_size, int compress_stride, int select_block_size, "
    "int select_block_count, *, Tensor? topk_mask=None, Tensor? atten_mask=None, "
    "int[]? actual_seq_qlen=None, int[]? actual_cmp_seq_kvlen=None, "
    "int[]? actual_sel_seq_kvlen=None) -> (Tensor, Tensor, Tensor, Tensor)",
    "npu_nsa_select_attention(Tensor query, Tensor key, Tensor value, Tensor topk_indices, "
    "float scale_value, int head_num, int select_block_size, int select_block_count, *, "
    "Tensor? atten_mask=None, int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None) -> (Tensor, "
    "Tensor, Tensor)",
    "npu_nsa_select_attention_grad(Tensor grad, Tensor query, Tensor key, Tensor value, "
    "Tensor attention_out, Tensor softmax_max, Tensor softmax_sum, Tensor topk_indices, "
    "float scale_value, int head_num, int select_block_size, int select_block_count, *, "
    "Tensor? atten_mask=None, int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None) -> (Tensor, "
    "Tensor, Tensor)",
    "npu_nsa_select_attention_infer(Tensor query, Tensor key, Tensor value, Tensor topk_indices, "
    "float scale_value, int head_num, int key_value_head_num, int select_block_size, "
    "int select_block_count, int page_block_size, *, str layout='BSND', Tensor? atten_mask=None, "
    "Tensor? block_table=None, int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None) -> Tensor",
    "npu_nsa_compress_infer.cache(Tensor input, Tensor weight, Tensor slot_mapping, "
    "int compress_block_size, int compress_stride, int page_block_size, *, Tensor? block_table=None, "
    "int[]? actual_seq_len=None, Tensor(a!) cache) -> Tensor(a!)",
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.split("(")[0])
def test_schema_is_op_plugins(schema):
    name = schema.split("(")[0]
    packet, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.npu, packet), overload or "default")
    assert op._schema == torch._C.parse_schema("npu::" + schema)
    assert getattr(torch_npu, packet) is not None


# --- plain references ---------------------------------------------------------------------

def paged(cache, table_row, length):
    """The first `length` tokens of one sequence of a paged cache (blocks, block_size, N, D)."""
    rows = []
    for j in range(length):
        rows.append(cache[int(table_row[j // cache.shape[1]]), j % cache.shape[1]])
    return torch.stack(rows) if rows else cache.new_zeros((0,) + tuple(cache.shape[2:]))


def ref_indexer_row(q, w, keys, visible, count, qscale=None, kscale=None):
    """Top `count` positions of sum_h w_h relu(q_h . k_j) over visible j (float64), -1 padded."""
    scores = []
    for j in range(keys.shape[0]):
        if not visible(j):
            continue
        total = 0.0
        for h in range(q.shape[0]):
            dot = float(q[h].double() @ keys[j].double())
            if qscale is not None:
                dot *= float(qscale[h]) * float(kscale[j])
            total += float(w[h]) * max(dot, 0.0)
        scores.append((total, j))
    scores.sort(key=lambda t: (-t[0], t[1]))
    picked = [j for _, j in scores[:count]]
    return picked + [-1] * (count - len(picked)), [s for s, _ in scores[:count]]


def ref_attention_row(q, keys, values, scale, sink=None, qr=None, kr=None):
    """Softmax attention of one token over the given keys, head by head (float64);
    (out (N, Dv), max (N,), sum (N,)); no key and no sink gives zeros, -inf, 0."""
    n = q.shape[0]
    out = torch.zeros(n, values.shape[-1], dtype=torch.float64)
    mx = torch.full((n,), NEG, dtype=torch.float64)
    sm = torch.zeros(n, dtype=torch.float64)
    for h in range(n):
        logits = keys.double() @ q[h].double()
        if qr is not None:
            logits = logits + kr.double() @ qr[h].double()
        logits = logits * scale
        full = logits if sink is None else torch.cat([logits, sink[h].double().view(1)])
        if full.numel() == 0:
            continue
        m = full.max()
        e = torch.exp(full - m)
        mx[h], sm[h] = m, e.sum()
        out[h] = (e[:logits.shape[0]] / e.sum()) @ values.double()
    return out, mx, sm


# --- lightning indexer ---------------------------------------------------------------------

def paged_case(seed, dtype=torch.bfloat16):
    """Two TND query sequences (3 and 2 tokens) over a paged index cache (keys 20 and 7)."""
    q = rnd(5, 4, 16, seed=seed).to(dtype)
    key = rnd(6, 16, 1, 16, seed=seed + 1).to(dtype)
    w = rnd(5, 4, seed=seed + 2).to(dtype)
    table = torch.tensor([[3, 1], [5, 0]], dtype=torch.int32)
    return q, key, w, table, torch.tensor([3, 5], dtype=torch.int32), torch.tensor([20, 7], dtype=torch.int32)


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_lightning_indexer_paged_tnd_causal(device):
    q, key, w, table, cq, lk = paged_case(0)
    args = [t.to(device) for t in (q, key, w)]
    idx, values = torch_npu.npu_lightning_indexer(
        *args, actual_seq_lengths_query=cq.to(device), actual_seq_lengths_key=lk.to(device),
        block_table=table.to(device), layout_query="TND", layout_key="PA_BSND", sparse_count=9, sparse_mode=3)
    assert idx.shape == (5, 1, 9) and idx.dtype == torch.int32 and values.numel() == 0
    starts, qlens = [0, 3], [3, 2]
    for t in range(5):
        b = 0 if t < 3 else 1
        i, length = t - starts[b], int(lk[b])
        keys = paged(key, table[b], length)[:, 0]
        limit = length - qlens[b] + i
        want, _ = ref_indexer_row(q[t], w[t], keys, lambda j: j <= limit, 9)
        assert idx[t, 0].cpu().tolist() == want


def test_lightning_indexer_bsnd_mode0_values():
    q = rnd(2, 3, 4, 16, seed=3).half()
    key = rnd(2, 6, 1, 16, seed=4).half()
    w = rnd(2, 3, 4, seed=5).float()
    lq, lk = torch.tensor([3, 2], dtype=torch.int32), torch.tensor([6, 4], dtype=torch.int32)
    idx, values = torch_npu.npu_lightning_indexer(q, key, w, actual_seq_lengths_query=lq, actual_seq_lengths_key=lk,
                                                  sparse_count=5, sparse_mode=0, return_value=True)
    assert idx.shape == values.shape == (2, 3, 1, 5) and values.dtype == torch.float16
    for b in range(2):
        for i in range(3):
            if i >= int(lq[b]):
                assert idx[b, i, 0].tolist() == [-1] * 5
                continue
            want, scores = ref_indexer_row(q[b, i], w[b, i], key[b, :int(lk[b]), 0], lambda j: True, 5)
            assert idx[b, i, 0].tolist() == want
            got = values[b, i, 0, :len(scores)].double()
            assert_close(got, torch.tensor(scores, dtype=torch.float64), atol=2e-2, rtol=2e-3)
            assert torch.isinf(values[b, i, 0, len(scores):]).all()



def test_lightning_indexer_tnd_keys_match_bsnd():
    q, key, w = rnd(1, 4, 4, 16, seed=13).half(), rnd(1, 9, 1, 16, seed=14).half(), rnd(1, 4, 4, seed=15).half()
    want, _ = torch_npu.npu_lightning_indexer(q, key, w, sparse_count=6)
    lens = dict(actual_seq_lengths_query=torch.tensor([4], dtype=torch.int32),
                actual_seq_lengths_key=torch.tensor([9], dtype=torch.int32))
    got, _ = torch_npu.npu_lightning_indexer(q[0], key[0], w[0], layout_query="TND", layout_key="TND",
                                             sparse_count=6, **lens)
    assert torch.equal(got, want[0])

def test_lightning_indexer_grad_matches_formula_and_autograd():
    q = rnd(1, 3, 4, 8, seed=6).half().requires_grad_()
    key = rnd(1, 5, 1, 8, seed=7).half().requires_grad_()
    w = rnd(1, 3, 4, seed=8).half().requires_grad_()
    idx, values = torch_npu.npu_lightning_indexer(q, key, w, sparse_count=4, sparse_mode=3, return_value=True)
    dy = torch.where(idx >= 0, rnd(*idx.shape, seed=9).half(), 0)
    torch.where(idx >= 0, values, 0).backward(dy)
    dq, dk, dw = torch_npu.npu_lightning_indexer_grad(q.detach(), key.detach(), dy, idx, w.detach(), layout="BSND")
    assert dq.dtype == q.dtype and dk.shape == key.shape and dw.shape == w.shape
    for got, auto in ((dq, q.grad), (dk, key.grad), (dw, w.grad)):
        assert_close(got.float(), auto.float(), atol=2e-2, rtol=1e-2)
    # the formula, token by token
    q, key, w = q.detach(), key.detach(), w.detach()
    rq, rk, rw = (torch.zeros(t.shape, dtype=torch.float64) for t in (q, key, w))
    for i in range(3):
        for c in range(4):
            j = int(idx[0, i, 0, c])
            if j < 0:
                continue
            for h in range(4):
                s = float(q[0, i, h].double() @ key[0, j, 0].double())
                g = float(dy[0, i, 0, c])
                rw[0, i, h] += g * max(s, 0.0)
                if s > 0:
                    rq[0, i, h] += g * float(w[0, i, h]) * key[0, j, 0].double()
                    rk[0, j, 0] += g * float(w[0, i, h]) * q[0, i, h].double()
    for got, want in ((dq, rq), (dk, rk), (dw, rw)):
        assert_close(got.double(), want, atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_quant_lightning_indexer_int8_paged(device):
    q = torch.randint(-100, 100, (2, 1, 4, 16), dtype=torch.int8)
    key = torch.randint(-100, 100, (4, 16, 1, 16), dtype=torch.int8)
    w = rnd(2, 1, 4, seed=10).half()
    qs = rnd(2, 1, 4, seed=11, lo=0.001, hi=0.01).half()
    ks = rnd(4, 16, 1, seed=12, lo=0.001, hi=0.01).half()
    table = torch.tensor([[2, 0], [1, 3]], dtype=torch.int32)
    lq, lk = torch.tensor([1, 1], dtype=torch.int32), torch.tensor([30, 9], dtype=torch.int32)
    out = torch_npu.npu_quant_lightning_indexer(
        *(t.to(device) for t in (q, key, w, qs, ks)), 0, 0, actual_seq_lengths_query=lq.to(device),
        actual_seq_lengths_key=lk.to(device), block_table=table.to(device), layout_key="PA_BSND", sparse_count=12)
    assert out.shape == (2, 1, 1, 12) and out.dtype == torch.int32
    for b in range(2):
        n = int(lk[b])
        keys, kscale = paged(key, table[b], n)[:, 0], paged(ks, table[b], n)[:, 0]
        want, _ = ref_indexer_row(q[b, 0], w[b, 0], keys, lambda j: True, 12, qs[b, 0], kscale)
        assert out[b, 0, 0].cpu().tolist() == want


# --- sparse flash attention ---------------------------------------------------------------

def sparse_positions(indices, block, length, visible):
    """Key positions a row of sparse_indices selects: blocks up to the first -1, clipped."""
    out = []
    for b in indices.tolist():
        if b == -1:
            break
        out += [p for p in range(b * block, (b + 1) * block) if p < length and visible(p)]
    return out


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_sparse_flash_attention_paged_tnd_mla(device):
    torch.manual_seed(0)
    kv = rnd(6, 16, 1, 32, seed=20).bfloat16()
    kr = rnd(6, 16, 1, 8, seed=21).bfloat16()
    q, qr = rnd(5, 4, 32, seed=22).bfloat16(), rnd(5, 4, 8, seed=23).bfloat16()
    table = torch.tensor([[3, 1], [5, 0]], dtype=torch.int32)
    cq, lk = torch.tensor([3, 5], dtype=torch.int32), torch.tensor([20, 7], dtype=torch.int32)
    idx = torch.stack([torch.randperm(20)[:6] for _ in range(5)]).view(5, 1, 6).int()
    idx[1, 0, 4:] = -1
    idx[3:, 0] = torch.tensor([[6, 0, 2, -1, -1, -1], [1, 5, 9, 3, -1, -1]], dtype=torch.int32)
    sinks = rnd(4, seed=24)
    args = [t.to(device) for t in (q, kv, kv, idx)]
    out, smax, ssum = torch_npu.npu_sparse_flash_attention(
        *args, 0.2, block_table=table.to(device), actual_seq_lengths_query=cq.to(device),
        actual_seq_lengths_kv=lk.to(device), query_rope=qr.to(device), key_rope=kr.to(device), layout_query="TND",
        layout_kv="PA_BSND", sparse_mode=3, attention_mode=2, return_softmax_lse=True, sinks=sinks.to(device))
    assert out.shape == (5, 4, 32) and out.dtype == torch.bfloat16 and smax.shape == ssum.shape == (1, 5, 4)
    starts, qlens = [0, 3], [3, 2]
    for t in range(5):
        b = 0 if t < 3 else 1
        length = int(lk[b])
        limit = length - qlens[b] + t - starts[b]
        pos = sparse_positions(idx[t, 0], 1, length, lambda p: p <= limit)
        keys, rope = paged(kv, table[b], length)[pos, 0], paged(kr, table[b], length)[pos, 0]
        want, mx, sm = ref_attention_row(q[t], keys, keys, 0.2, sinks, qr[t], rope)
        assert_close(out[t].cpu().double(), want, atol=2e-2, rtol=2e-2)
        assert_close(smax[0, t].cpu().double(), mx, atol=1e-3, rtol=1e-3)
        assert_close(ssum[0, t].cpu().double(), sm, atol=1e-3, rtol=1e-3)


def test_sparse_flash_attention_bsnd_blocks_mode0():
    q = rnd(2, 3, 2, 16, seed=30).half()
    k, v = rnd(2, 12, 1, 16, seed=31).half(), rnd(2, 12, 1, 16, seed=32).half()
    idx = torch.tensor([[[[0, 3, 5]], [[2, -1, 1]], [[4, 1, -1]]], [[[1, 0, 2]], [[5, 2, 0]], [[0, 0, 0]]]],
                       dtype=torch.int32)
    lq, lk = torch.tensor([3, 2], dtype=torch.int32), torch.tensor([11, 7], dtype=torch.int32)
    out, smax, ssum = torch_npu.npu_sparse_flash_attention(q, k, v, idx, 0.3, actual_seq_lengths_query=lq,
                                                           actual_seq_lengths_kv=lk, sparse_block_size=2,
                                                           sparse_mode=0)
    assert smax.numel() == 0 and ssum.numel() == 0
    for b in range(2):
        for i in range(3):
            if i >= int(lq[b]):
                assert (out[b, i] == 0).all()
                continue
            pos = sparse_positions(idx[b, i, 0], 2, int(lk[b]), lambda p: True)
            want, _, _ = ref_attention_row(q[b, i], k[b, pos, 0], v[b, pos, 0], 0.3)
            assert_close(out[b, i].double(), want, atol=3e-3, rtol=3e-3)


@pytest.mark.parametrize("layout", ["BSND", "TND"])
def test_sparse_flash_attention_grad_matches_autograd(layout):
    shape_q = (1, 4, 2, 8) if layout == "BSND" else (4, 2, 8)
    shape_k = (1, 6, 1, 8) if layout == "BSND" else (6, 1, 8)
    q = rnd(*shape_q, seed=40).half().requires_grad_()
    k = rnd(*shape_k, seed=41).half().requires_grad_()
    v = rnd(*shape_k, seed=42).half().requires_grad_()
    qr = rnd(*shape_q[:-1], 4, seed=43).half().requires_grad_()
    kr = rnd(*shape_k[:-1], 4, seed=44).half().requires_grad_()
    idx = torch.tensor([[5, 0, 2], [1, 3, -1], [4, 2, 0], [0, 5, 3]], dtype=torch.int32).view(*shape_q[:-2], 1, 3)
    lens = None if layout == "BSND" else torch.tensor([4], dtype=torch.int32)
    klens = None if layout == "BSND" else torch.tensor([6], dtype=torch.int32)
    out, smax, ssum = torch_npu.npu_sparse_flash_attention(
        q, k, v, idx, 0.4, actual_seq_lengths_query=lens, actual_seq_lengths_kv=klens, query_rope=qr, key_rope=kr,
        layout_query=layout, layout_kv=layout, sparse_mode=3, attention_mode=2, return_softmax_lse=True)
    dout = rnd(*out.shape, seed=45).half()
    out.backward(dout)
    grads = torch_npu.npu_sparse_flash_attention_grad(
        q.detach(), k.detach(), v.detach(), idx, dout, out.detach(), smax, ssum, 0.4, 1, qr.detach(), kr.detach(),
        lens, klens, layout, 3)
    for got, leaf in zip(grads, (q, k, v, qr, kr)):
        assert got.shape == leaf.shape and got.dtype == leaf.dtype
        assert_close(got.float(), leaf.grad.float(), atol=3e-3, rtol=3e-3)


def pack_kv(nope_i8, rope, scales):
    return torch.cat((nope_i8, rope.view(torch.int8), scales.view(torch.int8)), -1)


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_kv_quant_sparse_flash_attention_packed_cache(device):
    torch.manual_seed(1)
    nope = torch.randint(-120, 120, (4, 16, 1, 256), dtype=torch.int8)
    rope = rnd(4, 16, 1, 64, seed=50).bfloat16()
    scales = rnd(4, 16, 1, 2, seed=51, lo=0.001, hi=0.02)
    key = pack_kv(nope, rope, scales)
    assert key.shape[-1] == 256 + 128 + 8
    q = rnd(3, 2, 320, seed=52).bfloat16()
    table = torch.tensor([[2, 0], [1, 3]], dtype=torch.int32)
    cq, lk = torch.tensor([2, 3], dtype=torch.int32), torch.tensor([25, 10], dtype=torch.int32)
    idx = torch.tensor([[[3, 24, 7, -1]], [[0, 1, 2, 3]], [[9, 4, 8, -1]]], dtype=torch.int32)
    out = torch_npu.npu_kv_quant_sparse_flash_attention(
        *(t.to(device) for t in (q, key, key, idx)), 0.05, 2, 2, block_table=table.to(device),
        actual_seq_lengths_query=cq.to(device), actual_seq_lengths_kv=lk.to(device), layout_query="TND",
        layout_kv="PA_BSND", attention_mode=2, tile_size=128, rope_head_dim=64).cpu()
    assert out.shape == (3, 2, 256) and out.dtype == torch.bfloat16
    for t, (b, i, qlen) in enumerate([(0, 0, 2), (0, 1, 2), (1, 0, 1)]):
        length = int(lk[b])
        limit = length - qlen + i
        pos = sparse_positions(idx[t, 0], 1, length, lambda p: p <= limit)
        deq = (paged(nope, table[b], length)[pos, 0].double()
               * paged(scales, table[b], length)[pos, 0].double().repeat_interleave(128, -1)).bfloat16()
        want, _, _ = ref_attention_row(q[t, :, :256], deq, deq, 0.05, None, q[t, :, 256:],
                                       paged(rope, table[b], length)[pos, 0])
        assert_close(out[t].double(), want, atol=3e-2, rtol=2e-2)
    # value given as k_nope only: dequantised with the key's scales
    nope_only = torch_npu.npu_kv_quant_sparse_flash_attention(
        q, key, nope, idx, 0.05, 2, 2, block_table=table, actual_seq_lengths_query=cq, actual_seq_lengths_kv=lk,
        layout_query="TND", layout_kv="PA_BSND", attention_mode=2)
    assert torch.equal(nope_only, out)


def test_quant_lightning_indexer_hifloat8():
    from torch_npu import _hifloat8 as codec
    q, key = codec.encode(rnd(2, 1, 4, 16, seed=60)), codec.encode(rnd(4, 16, 1, 16, seed=61))
    w = rnd(2, 1, 4, seed=62).half()
    qs = rnd(2, 1, 4, seed=63, lo=0.5, hi=1.5)
    ks = rnd(4, 16, 1, seed=64, lo=0.5, hi=1.5)
    table = torch.tensor([[2, 0], [1, 3]], dtype=torch.int32)
    lq, lk = torch.tensor([1, 1], dtype=torch.int32), torch.tensor([30, 9], dtype=torch.int32)
    kw = dict(actual_seq_lengths_query=lq, actual_seq_lengths_key=lk, block_table=table, layout_key="PA_BSND",
              sparse_count=12, query_dtype=torch_npu.hifloat8, key_dtype=torch_npu.hifloat8)
    out = torch_npu.npu_quant_lightning_indexer(q, key, w, qs, ks, 0, 0, **kw)
    out_npu = torch_npu.npu_quant_lightning_indexer(q.npu(), key.view(torch.int8).npu(), w.npu(), qs.npu(),
                                                    ks.npu(), 0, 0, **{k: v.npu() if isinstance(v, torch.Tensor)
                                                                       else v for k, v in kw.items()})
    assert out.shape == (2, 1, 1, 12) and out.dtype == torch.int32 and torch.equal(out_npu.cpu(), out)
    qv, kv = codec.decode(q), codec.decode(key)  # the indexer's formula on the decoded values
    for b in range(2):
        n = int(lk[b])
        keys, kscale = paged(kv, table[b], n)[:, 0], paged(ks, table[b], n)[:, 0]
        want, _ = ref_indexer_row(qv[b, 0], w[b, 0], keys, lambda j: True, 12, qs[b, 0], kscale)
        assert out[b, 0, 0].tolist() == want


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_kv_quant_sparse_flash_attention_hifloat8(device):
    from torch_npu import _hifloat8 as codec
    nope = codec.encode(rnd(4, 16, 1, 256, seed=70) * 8)
    rope = rnd(4, 16, 1, 64, seed=71).bfloat16()
    scales = rnd(4, 16, 1, 2, seed=72, lo=0.01, hi=0.2)
    key = torch.cat((nope, rope.view(torch.uint8), scales.view(torch.uint8)), -1)
    q = rnd(3, 2, 320, seed=73).bfloat16()
    table = torch.tensor([[2, 0], [1, 3]], dtype=torch.int32)
    cq, lk = torch.tensor([2, 3], dtype=torch.int32), torch.tensor([25, 10], dtype=torch.int32)
    idx = torch.tensor([[[3, 24, 7, -1]], [[0, 1, 2, 3]], [[9, 4, 8, -1]]], dtype=torch.int32)
    out = torch_npu.npu_kv_quant_sparse_flash_attention(
        *(t.to(device) for t in (q, key, key, idx)), 0.05, 2, 2, block_table=table.to(device),
        actual_seq_lengths_query=cq.to(device), actual_seq_lengths_kv=lk.to(device), layout_query="TND",
        layout_kv="PA_BSND", attention_mode=2, tile_size=128, rope_head_dim=64, key_dtype=torch_npu.hifloat8,
        value_dtype=torch_npu.hifloat8).cpu()
    assert out.shape == (3, 2, 256) and out.dtype == torch.bfloat16
    nope_v = codec.decode(nope)  # k_nope decoded, then times its tile scales
    for t, (b, i, qlen) in enumerate([(0, 0, 2), (0, 1, 2), (1, 0, 1)]):
        length = int(lk[b])
        limit = length - qlen + i
        pos = sparse_positions(idx[t, 0], 1, length, lambda p: p <= limit)
        deq = (paged(nope_v, table[b], length)[pos, 0].double()
               * paged(scales, table[b], length)[pos, 0].double().repeat_interleave(128, -1)).bfloat16()
        want, _, _ = ref_attention_row(q[t, :, :256], deq, deq, 0.05, None, q[t, :, 256:],
                                       paged(rope, table[b], length)[pos, 0])
        assert_close(out[t].double(), want, atol=3e-2, rtol=2e-2)


# --- MLA prolog ---------------------------------------------------------------------------

def rope_ref(x, cos, sin):
    """The documented interleave-half RoPE of one vector."""
    half = x.shape[-1] // 2
    y = torch.zeros(x.shape[-1], dtype=torch.float64)
    for k in range(half):
        y[k] = x[2 * k] * cos[k] - x[2 * k + 1] * sin[k]
        y[half + k] = x[2 * k + 1] * cos[half + k] + x[2 * k] * sin[half + k]
    return y


def rms_ref(v, gamma, eps=1e-5):
    return v / torch.sqrt((v * v).mean() + eps) * gamma.double()


def mla_inputs(t, he=64, hcq=32, n=2, d=16, dr=16, hckv=32, seed=60):
    w = dict(weight_dq=(rnd(he, hcq, seed=seed) * 0.2).bfloat16(),
             weight_uq_qr=(rnd(hcq, n * (d + dr), seed=seed + 1) * 0.2).bfloat16(),
             weight_uk=(rnd(n, d, hckv, seed=seed + 2) * 0.3).bfloat16(),
             weight_dkv_kr=(rnd(he, hckv + dr, seed=seed + 3) * 0.2).bfloat16(),
             rmsnorm_gamma_cq=rnd(hcq, seed=seed + 4, lo=0.5, hi=1.5).bfloat16(),
             rmsnorm_gamma_ckv=rnd(hckv, seed=seed + 5, lo=0.5, hi=1.5).bfloat16())
    x = rnd(t, he, seed=seed + 6).bfloat16()
    sin, cos = rnd(t, dr, seed=seed + 7).bfloat16(), rnd(t, dr, seed=seed + 8).bfloat16()
    return x, w, sin, cos


def mla_ref(x, w, sin, cos, alpha_q=1.0, alpha_kv=1.0):
    """Per token, float64: (query (N, Hckv), query_rope (N, Dr), c^Q, c^KV, k^R)."""
    n, d, _ = w["weight_uk"].shape
    dr = sin.shape[-1]
    out = []
    for t in range(x.shape[0]):
        xt = x[t].double()
        cq = rms_ref(xt @ w["weight_dq"].double(), w["rmsnorm_gamma_cq"]) * alpha_q
        qcqr = (cq @ w["weight_uq_qr"].double()).view(n, d + dr)
        query = torch.stack([qcqr[h, :d] @ w["weight_uk"][h].double() for h in range(n)])
        qrope = torch.stack([rope_ref(qcqr[h, d:], cos[t].double(), sin[t].double()) for h in range(n)])
        ckvkr = xt @ w["weight_dkv_kr"].double()
        hckv = ckvkr.shape[0] - dr
        ckv = rms_ref(ckvkr[:hckv], w["rmsnorm_gamma_ckv"]) * alpha_kv
        out.append((query, qrope, cq, ckv, rope_ref(ckvkr[hckv:], cos[t].double(), sin[t].double())))
    return out


def close_bf16(got, want):
    assert_close(got.double(), want, atol=4e-2 * max(1.0, float(want.abs().max())), rtol=3e-2)


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_mla_prolog_v1_v2_paged(version, device):
    x, w, sin, cos = mla_inputs(3)
    kv, kr = torch.zeros(4, 8, 1, 32).bfloat16(), torch.zeros(4, 8, 1, 16).bfloat16()
    slots = torch.tensor([5, -1, 30])
    op = torch_npu.npu_mla_prolog if version == 1 else torch_npu.npu_mla_prolog_v2
    dev = {k: v.to(device) for k, v in w.items()}
    kv_d, kr_d = kv.to(device), kr.to(device)
    outs = op(x.to(device), dev["weight_dq"], dev["weight_uq_qr"], dev["weight_uk"], dev["weight_dkv_kr"],
              dev["rmsnorm_gamma_cq"], dev["rmsnorm_gamma_ckv"], sin.to(device), cos.to(device), slots.to(device),
              kv_d, kr_d)
    assert len(outs) == 3 + version and outs[2] is kv_d and outs[3] is kr_d
    assert outs[0].shape == (3, 2, 32) and outs[1].shape == (3, 2, 16) and outs[1].dtype == torch.bfloat16
    if version == 2:
        assert outs[4].shape == (1,) and outs[4].dtype == torch.float32
    ref = mla_ref(x, w, sin, cos)
    for t, slot in enumerate(slots.tolist()):
        close_bf16(outs[0][t].cpu(), ref[t][0])
        close_bf16(outs[1][t].cpu(), ref[t][1])
        if slot >= 0:
            close_bf16(kv_d.cpu()[slot // 8, slot % 8, 0], ref[t][3])
            close_bf16(kr_d.cpu()[slot // 8, slot % 8, 0], ref[t][4])
    written = kv_d.cpu().reshape(32, -1).abs().sum(-1).nonzero().flatten().tolist()
    assert written == [5, 30]


def test_mla_prolog_v2_pa_nz_writes_nz_blocks():
    x, w, sin, cos = mla_inputs(2)
    kv, kr = torch.zeros(2, 8, 1, 32).bfloat16(), torch.zeros(2, 8, 1, 16).bfloat16()
    torch_npu.npu_mla_prolog_v2(x, *w.values(), sin, cos, torch.tensor([3, 9]), kv, kr, cache_mode="PA_NZ")
    ref = mla_ref(x, w, sin, cos)
    for t, slot in enumerate([3, 9]):
        block, off = slot // 8, slot % 8
        # NZ: each block stores its tokens' 32 features as [2][block_size][16]
        got = kv.view(2, 2, 8, 16)[block, :, off, :].reshape(32)
        close_bf16(got, ref[t][3])
        close_bf16(kr.view(2, 1, 8, 16)[block, 0, off], ref[t][4])


def test_mla_prolog_v3_bsnd_query_norm_and_functional():
    x, w, sin, cos = mla_inputs(4)
    x3, sin3, cos3 = x.view(2, 2, 64), sin.view(2, 2, 16), cos.view(2, 2, 16)
    kv, kr = torch.zeros(2, 2, 1, 32).bfloat16(), torch.zeros(2, 2, 1, 16).bfloat16()
    kwargs = dict(cache_mode="BSND", query_norm_flag=True, qc_qr_scale=0.5, kc_scale=2.0)
    fouts = torch_npu.npu_mla_prolog_v3_functional(x3, *w.values(), sin3, cos3, kv, kr, **kwargs)
    assert len(fouts) == 7 and (kv == 0).all()
    q, qrope, dq, qnorm, dqn = torch_npu.npu_mla_prolog_v3(x3, *w.values(), sin3, cos3, kv, kr, **kwargs)
    assert q.shape == (2, 2, 2, 32) and q.dtype == torch.bfloat16 and qrope.shape == (2, 2, 2, 16)
    assert dq is None and dqn is None and qnorm.shape == (2, 2, 32) and qnorm.dtype == torch.bfloat16
    for a, b in zip((q, qrope, qnorm, kv, kr), fouts[:2] + fouts[3:4] + fouts[5:]):
        assert torch.equal(a, b)
    ref = mla_ref(x, w, sin, cos, alpha_q=0.5, alpha_kv=2.0)
    for t in range(4):
        close_bf16(q.view(4, 2, 32)[t], ref[t][0])
        close_bf16(qnorm.view(4, 32)[t], ref[t][2])
        close_bf16(kv.view(4, 32)[t], ref[t][3])
        close_bf16(kr.view(4, 16)[t], ref[t][4])
    # functionalization replaces the in-place op by the functional one plus copies
    kv2, kr2 = torch.zeros_like(kv), torch.zeros_like(kr)

    def f(kvc, krc):
        return torch.ops.npu.npu_mla_prolog_v3(x3, *w.values(), sin3, cos3, kvc, krc, **kwargs)[0]

    got = torch.func.functionalize(f)(kv2, kr2)
    assert torch.equal(got, q) and torch.equal(kv2, kv) and torch.equal(kr2, kr)


def quant_int8_per_channel(wt):
    scale = wt.abs().amax(0, keepdim=True) / 127
    return torch.round(wt / scale).clamp(-127, 127).to(torch.int8), scale.float()


def test_mla_prolog_v2_int8_full_quant_kv_quant():
    x, w, sin, cos = mla_inputs(3)
    xs = x.float().abs().amax(-1, keepdim=True) / 127
    x8 = torch.round(x.float() / xs).to(torch.int8)
    wdq8, sdq = quant_int8_per_channel(w["weight_dq"].float())
    wuq8, suq = quant_int8_per_channel(w["weight_uq_qr"].float())
    wdkv8, sdkv = quant_int8_per_channel(w["weight_dkv_kr"].float())
    kv, kr = torch.zeros(2, 8, 1, 32, dtype=torch.int8), torch.zeros(2, 8, 1, 16).bfloat16()
    qs_ckv = torch.tensor([20.0])
    q, qrope, _, _, dq = torch_npu.npu_mla_prolog_v2(
        x8, wdq8, wuq8, w["weight_uk"], wdkv8, w["rmsnorm_gamma_cq"], w["rmsnorm_gamma_ckv"], sin, cos,
        torch.tensor([0, 7, 12]), kv, kr, dequant_scale_x=xs, dequant_scale_w_dq=sdq, dequant_scale_w_uq_qr=suq,
        dequant_scale_w_dkv_kr=sdkv, quant_scale_ckv=qs_ckv)
    assert q.dtype == torch.int8 and dq.shape == (3, 2, 1) and dq.dtype == torch.float32
    # reference on the dequantised inputs
    deq = dict(w, weight_dq=wdq8.double() * sdq, weight_uq_qr=wuq8.double() * suq,
               weight_dkv_kr=wdkv8.double() * sdkv)
    ref = mla_ref(x8.double() * xs, deq, sin, cos)
    for t, slot in enumerate([0, 7, 12]):
        want = ref[t][0]
        assert_close(q[t].double() * dq[t].double(), want, atol=0.05 * float(want.abs().max()), rtol=0)
        kv_want = torch.round(ref[t][3] * 20).clamp(-128, 127)
        assert (kv[slot // 8, slot % 8, 0].double() - kv_want).abs().max() <= 1
        close_bf16(qrope[t], ref[t][1])


def test_mla_prolog_v3_packed_pertoken_group_cache_feeds_kv_quant_sfa():
    x, w, sin, cos = mla_inputs(3, hckv=256, dr=64, d=16, n=2, seed=70)
    kv_plain, kr_plain = torch.zeros(2, 16, 1, 256).bfloat16(), torch.zeros(2, 16, 1, 64).bfloat16()
    slots = torch.tensor([17, 3, 30])
    q, qr, _, _, _ = torch_npu.npu_mla_prolog_v3(x, *w.values(), sin, cos, kv_plain, kr_plain, cache_index=slots)
    packed = torch.zeros(2, 16, 1, 256 + 128 + 8, dtype=torch.int8)
    q2, _, dq, _, _ = torch_npu.npu_mla_prolog_v3(x, *w.values(), sin, cos, packed, torch.empty(0).bfloat16(),
                                                  cache_index=slots, kv_cache_quant_mode=3, ckvkr_repo_mode=1,
                                                  quant_scale_repo_mode=1, tile_size=128,
                                                  k_nope_clip_alpha=torch.ones(1))
    assert torch.equal(q2, q) and dq is None
    for slot in slots.tolist():
        row = packed[slot // 16, slot % 16, 0]
        plain = kv_plain[slot // 16, slot % 16, 0].double()
        scale = row[384:].contiguous().view(torch.float32).double()
        assert_close(scale, plain.view(2, 128).abs().amax(-1) / 127, atol=1e-3, rtol=1e-2)
        assert_close(row[:256].double() * scale.repeat_interleave(128), plain, atol=float(scale.max()), rtol=0)
        assert torch.equal(row[256:384].contiguous().view(torch.bfloat16), kr_plain[slot // 16, slot % 16, 0])
    table = torch.tensor([[1, 0]], dtype=torch.int32)
    idx = torch.tensor([[[1, 0, 3, 14, -1]]], dtype=torch.int32)
    common = dict(block_table=table, actual_seq_lengths_query=torch.tensor([1], dtype=torch.int32),
                  actual_seq_lengths_kv=torch.tensor([20], dtype=torch.int32), layout_query="TND",
                  layout_kv="PA_BSND", sparse_mode=0, attention_mode=2)
    want = torch_npu.npu_sparse_flash_attention(q[:1], kv_plain, kv_plain, idx, 0.1, query_rope=qr[:1],
                                                key_rope=kr_plain, **common)[0]
    got = torch_npu.npu_kv_quant_sparse_flash_attention(torch.cat((q[:1], qr[:1]), -1), packed, packed, idx, 0.1, 2,
                                                        2, **common)
    assert_close(got.float(), want.float(), atol=0.05 * float(want.abs().max()), rtol=0)


def mx(x):
    """x (rows, cols) as float8_e4m3fn with one E8M0 scale per 32 columns, OCP MX."""
    blocks = x.float().view(x.shape[0], -1, 32)
    expo = torch.floor(torch.log2(blocks.abs().amax(-1))) - 8
    q = (blocks / torch.exp2(expo).unsqueeze(-1)).to(torch.float8_e4m3fn).view(x.shape)
    return q, torch.exp2(expo).to(torch.float8_e8m0fnu)


def test_mla_prolog_v3_mxfp8():
    x, w, sin, cos = mla_inputs(2, he=64, hcq=64, seed=80)
    x8, sx = mx(x)
    wts = {}
    for name in ("weight_dq", "weight_uq_qr", "weight_dkv_kr"):
        q8, s = mx(w[name].t().contiguous())  # scales per output channel and 32 input rows
        wts[name] = (q8.t(), s)
    kv, kr = torch.zeros(1, 16, 1, 32).bfloat16(), torch.zeros(1, 16, 1, 16).bfloat16()
    q, _, _, qnorm, dqn = torch_npu.npu_mla_prolog_v3(
        x8, wts["weight_dq"][0], wts["weight_uq_qr"][0], w["weight_uk"], wts["weight_dkv_kr"][0],
        w["rmsnorm_gamma_cq"], w["rmsnorm_gamma_ckv"], sin, cos, kv, kr, cache_index=torch.tensor([0, 1]),
        dequant_scale_x=sx, dequant_scale_w_dq=wts["weight_dq"][1], dequant_scale_w_uq_qr=wts["weight_uq_qr"][1],
        dequant_scale_w_dkv_kr=wts["weight_dkv_kr"][1], weight_quant_mode=3, query_norm_flag=True)
    assert qnorm.dtype == torch.float8_e4m3fn and dqn.shape == (2, 2) and dqn.dtype == torch.float8_e8m0fnu
    deq = dict(w)
    for name in wts:
        deq[name] = (wts[name][0].double() * wts[name][1].double().repeat_interleave(32, -1).t())
    ref = mla_ref(x8.double() * sx.double().repeat_interleave(32, -1), deq, sin, cos)
    for t in range(2):
        want = ref[t][0]
        assert float((q[t].double() - want).norm() / want.norm()) < 0.1
        cq = qnorm[t].double() * dqn[t].double().repeat_interleave(32)
        assert float((cq - ref[t][2]).norm() / ref[t][2].norm()) < 0.05


# --- the indexer's losses -----------------------------------------------------------------

def index_score(qi, ki, w, j):
    """I_j = sum_h w_h relu(qi_h . k_j) and the per-head dots, float64."""
    dots = qi.double() @ ki[j].double()
    return float((w.double() * dots.clamp(min=0)).sum()), dots


@pytest.mark.parametrize("layout", ["BSND", "TND"])
def test_dense_indexer_softmax_lse(layout):
    qi = rnd(2, 3, 4, 8, seed=90).half()
    ki = rnd(2, 5, 1, 8, seed=91).half()
    w = rnd(2, 3, 4, seed=92).half()
    kwargs = {}
    if layout == "TND":
        qi, ki, w = qi.view(6, 4, 8)[:5], ki.view(10, 1, 8)[:9], w.view(6, 4)[:5]
        kwargs = dict(actual_seq_qlen=[3, 5], actual_seq_klen=[5, 9], layout="TND")
        seqs = [(0, 3, 0, 5), (3, 5, 5, 9)]
    mx, sm = torch_npu.npu_dense_lightning_indexer_softmax_lse(qi, ki, w, **kwargs)
    assert mx.shape == sm.shape == ((2, 1, 3) if layout == "BSND" else (1, 5)) and mx.dtype == torch.float32
    if layout == "BSND":
        seqs = [(b, i) for b in range(2) for i in range(3)]
    for item in seqs if layout == "BSND" else [(b, t) for b in range(2) for t in range(*seqs[b][:2])]:
        if layout == "BSND":
            b, i = item
            q_row, keys, wt, sq, skv = qi[b, i], ki[b, :, 0], w[b, i], 3, 5
            got_m, got_s = mx[b, 0, i], sm[b, 0, i]
        else:
            b, t = item
            qs, qe, ks, ke = seqs[b]
            i, q_row, keys, wt, sq, skv = t - qs, qi[t], ki[ks:ke, 0], w[t], qe - qs, ke - ks
            got_m, got_s = mx[0, t], sm[0, t]
        scores = torch.tensor([index_score(q_row, keys, wt, j)[0] for j in range(skv - sq + i + 1)])
        assert_close(got_m.double(), scores.max().double(), atol=1e-3, rtol=1e-4)
        assert_close(got_s.double(), torch.exp(scores - scores.max()).sum().double(), atol=1e-4, rtol=1e-4)


def main_attention_stats(q, qr, k, kr, scale, visible_rows):
    """softmax max / sum of the main attention per (token, head) over the visible keys."""
    mx, sm = [], []
    for i, vis in enumerate(visible_rows):
        logits = (k[vis].double() @ q[i].double().T + kr[vis].double() @ qr[i].double().T).T * scale
        mx.append(logits.max(-1).values)
        sm.append(torch.exp(logits - logits.max(-1, keepdim=True).values).sum(-1))
    return torch.stack(mx), torch.stack(sm)


def kl_reference(q_rows, qr_rows, k_rows, kr_rows, qi, ki, w, scale, visible, smax, ssum, imax, isum, n1):
    """Loss and gradients of the indexer KL loss, token by token in float64 (keys indexed by position)."""
    dq, dk, dw = (torch.zeros(t.shape, dtype=torch.float64) for t in (qi, ki, w))
    loss = 0.0
    for i, vis in enumerate(visible):
        for j in vis:
            p = 0.0
            for h in range(n1):
                kh = k_rows[j][h if k_rows.dim() == 3 and k_rows.shape[1] > 1 else 0]
                krh = kr_rows[j][h if kr_rows.shape[1] > 1 else 0]
                s = (float(q_rows[i, h].double() @ kh.double()) + float(qr_rows[i, h].double() @ krh.double())) * scale
                p += math.exp(s - float(smax[i, h])) / float(ssum[i, h])
            p /= n1
            score, dots = index_score(qi[i], ki[:, 0], w[i], j)
            sy = math.exp(score - float(imax[i])) / float(isum[i])
            loss += p * (math.log(max(p, 1e-8)) - math.log(max(sy, 1e-8)))
            d_i = sy - p
            for h in range(qi.shape[1]):
                dw[i, h] += d_i * max(float(dots[h]), 0.0)
                if dots[h] > 0:
                    dq[i, h] += d_i * float(w[i, h]) * ki[j, 0].double()
                    dk[j, 0] += d_i * float(w[i, h]) * qi[i, h].double()
    return dq, dk, dw, loss


def test_dense_indexer_grad_kl_loss():
    s1, s2, n1, n1i = 3, 5, 2, 4
    q, qr = rnd(1, s1, n1, 8, seed=100).half(), rnd(1, s1, n1, 4, seed=101).half()
    k, kr = rnd(1, s2, n1, 8, seed=102).half(), rnd(1, s2, n1, 4, seed=103).half()
    qi, ki = rnd(1, s1, n1i, 8, seed=104).half(), rnd(1, s2, 1, 8, seed=105).half()
    w = rnd(1, s1, n1i, seed=106).float()
    visible = [list(range(s2 - s1 + i + 1)) for i in range(s1)]
    smax, ssum = [], []
    for i, vis in enumerate(visible):
        per_head = [main_attention_stats(q[0, i:i + 1, h:h + 1], qr[0, i:i + 1, h:h + 1], k[0, :, h:h + 1].squeeze(1),
                                         kr[0, :, h:h + 1].squeeze(1), 0.3, [vis]) for h in range(n1)]
        smax.append(torch.cat([m[0] for m in per_head], -1))
        ssum.append(torch.cat([s[0] for s in per_head], -1))
    smax, ssum = torch.stack(smax).view(s1, n1), torch.stack(ssum).view(s1, n1)
    imax, isum = torch_npu.npu_dense_lightning_indexer_softmax_lse(qi, ki, w)
    dq, dk, dw, loss = torch_npu.npu_dense_lightning_indexer_grad_kl_loss(
        q, k, qi, ki, w, smax.T.reshape(1, n1, s1, 1).float(), ssum.T.reshape(1, n1, s1, 1).float(), imax, isum,
        0.3, query_rope=qr, key_rope=kr, layout="BSND")
    assert dq.dtype == qi.dtype and dw.dtype == w.dtype and loss.shape == (1,) and loss.dtype == torch.float32
    rq, rk, rw, rloss = kl_reference(q[0], qr[0], k[0], kr[0], qi[0], ki[0], w[0], 0.3, visible, smax, ssum,
                                     imax[0, 0], isum[0, 0], n1)
    assert_close(loss.double()[0], torch.tensor(rloss, dtype=torch.float64), atol=1e-4, rtol=1e-3)
    assert_close(dq[0].double(), rq, atol=2e-3, rtol=2e-3)
    assert_close(dk[0].double(), rk, atol=2e-3, rtol=2e-3)
    assert_close(dw[0].double(), rw, atol=2e-3, rtol=2e-3)


def test_sparse_indexer_grad_kl_loss():
    s1, s2, n1, n1i = 3, 6, 4, 4
    q, qr = rnd(1, s1, n1, 16, seed=110).half(), rnd(1, s1, n1, 4, seed=111).half()
    k, kr = rnd(1, s2, 1, 16, seed=112).half(), rnd(1, s2, 1, 4, seed=113).half()
    qi, ki = rnd(1, s1, n1i, 8, seed=114).half(), rnd(1, s2, 1, 8, seed=115).half()
    w = rnd(1, s1, n1i, seed=116).half()
    idx = torch.tensor([[2, 0, 5, -1], [1, 4, 3, 0], [5, 2, 1, 0]], dtype=torch.int32).view(1, s1, 1, 4)
    _, smax, ssum = torch_npu.npu_sparse_flash_attention(q, k, k, idx, 0.25, query_rope=qr, key_rope=kr,
                                                         sparse_mode=3, attention_mode=2, return_softmax_lse=True)
    dq, dk, dw, loss = torch_npu.npu_sparse_lightning_indexer_grad_kl_loss(
        q, k, qi, ki, w, idx, smax, ssum, 0.25, query_rope=qr, key_rope=kr, layout="BSND", sparse_mode=3)
    visible = [sparse_positions(idx[0, i, 0], 1, s2, lambda p, i=i: p <= s2 - s1 + i) for i in range(s1)]
    # the index softmax over the selected keys only
    imax, isum = [], []
    for i, vis in enumerate(visible):
        scores = torch.tensor([index_score(qi[0, i], ki[0, :, 0], w[0, i], j)[0] for j in vis], dtype=torch.float64)
        imax.append(scores.max())
        isum.append(torch.exp(scores - scores.max()).sum())
    rq, rk, rw, rloss = kl_reference(q[0], qr[0], k[0], kr[0], qi[0], ki[0], w[0], 0.25, visible,
                                     smax[0, 0], ssum[0, 0], torch.stack(imax), torch.stack(isum), n1)
    assert_close(loss.double()[0], torch.tensor(rloss, dtype=torch.float64), atol=1e-4, rtol=1e-3)
    assert_close(dq[0].double(), rq, atol=2e-3, rtol=2e-3)
    assert_close(dk[0].double(), rk, atol=2e-3, rtol=2e-3)
    assert_close(dw[0].double(), rw, atol=2e-3, rtol=2e-3)


# --- block sparse attention ---------------------------------------------------------------

def block_sparse_ref(q, k, v, mask, bx, by, scale):
    """One batch: q (N, sq, D), k / v (N2, skv, D), mask (N, qblocks, kblocks): (out, lse) float64."""
    n, sq = q.shape[0], q.shape[1]
    g = n // k.shape[0]
    out = torch.zeros(n, sq, v.shape[-1], dtype=torch.float64)
    lse = torch.full((n, sq), NEG, dtype=torch.float64)
    for h in range(n):
        for i in range(sq):
            keys = [j for j in range(k.shape[1]) if mask[h, i // bx, j // by]]
            if not keys:
                continue
            logits = k[h // g, keys].double() @ q[h, i].double() * scale
            lse[h, i] = torch.logsumexp(logits, 0)
            out[h, i] = torch.softmax(logits, 0) @ v[h // g, keys].double()
    return out, lse


def test_block_sparse_attention_bnsd_and_tnd():
    b, n, n2, s, d = 2, 4, 2, 200, 8
    q = rnd(b, n, s, d, seed=120).half()
    k, v = rnd(b, n2, s, d, seed=121).half(), rnd(b, n2, s, d, seed=122).half()
    mask = (torch.rand(b, n, 4, 2, generator=torch.Generator().manual_seed(0)) > 0.4).to(torch.int8)
    mask[0, 0, 1] = 0  # a query block that sees nothing
    out, lse = torch_npu.npu_block_sparse_attention(q, k, v, mask, [64, 128], q_input_layout="BNSD",
                                                    kv_input_layout="BNSD", num_key_value_heads=n2, scale_value=0.3,
                                                    actual_seq_lengths=[200, 150], actual_seq_lengths_kv=[200, 180],
                                                    softmax_lse_flag=1)
    assert out.shape == q.shape and lse.shape == (b, n, s, 1) and lse.dtype == torch.float32
    for bi, (sq, skv) in enumerate([(200, 200), (150, 180)]):
        want, wlse = block_sparse_ref(q[bi, :, :sq], k[bi, :, :skv], v[bi, :, :skv], mask[bi], 64, 128, 0.3)
        assert_close(out[bi, :, :sq].double(), want, atol=3e-3, rtol=3e-3)
        assert_close(lse[bi, :, :sq, 0].double(), wlse, atol=1e-3, rtol=1e-3)
        assert (out[bi, :, sq:] == 0).all()
    # TND: per-batch lengths
    qt = torch.cat([q[0, :, :200].transpose(0, 1), q[1, :, :150].transpose(0, 1)])
    kt = torch.cat([k[0, :, :200].transpose(0, 1), k[1, :, :180].transpose(0, 1)])
    vt = torch.cat([v[0, :, :200].transpose(0, 1), v[1, :, :180].transpose(0, 1)])
    out_t, lse_t = NPU.npu_block_sparse_attention(qt, kt, vt, mask, [64, 128], num_key_value_heads=n2,
                                                  scale_value=0.3, actual_seq_lengths=[200, 150],
                                                  actual_seq_lengths_kv=[200, 180])
    assert torch.equal(out_t[:200], out[0].transpose(0, 1))
    assert torch.equal(out_t[200:], out[1, :, :150].transpose(0, 1))


@pytest.mark.parametrize("layout", ["BNSD", "TND"])
def test_block_sparse_attention_backward_matches_autograd(layout):
    n, n2, d = 2, 1, 8
    shape_q, shape_k = ((1, n, 130, d), (1, n2, 140, d)) if layout == "BNSD" else ((130, n, d), (140, n2, d))
    q = rnd(*shape_q, seed=130).half().requires_grad_()
    k = rnd(*shape_k, seed=131).half().requires_grad_()
    v = rnd(*shape_k, seed=132).half().requires_grad_()
    mask = torch.tensor([[[[1, 1], [0, 1], [1, 0]], [[1, 0], [1, 1], [0, 1]]]], dtype=torch.int8)
    lens = dict(actual_seq_lengths=[130], actual_seq_lengths_kv=[140])
    out, lse = torch_npu.npu_block_sparse_attention(q, k, v, mask, [64, 128], q_input_layout=layout,
                                                    kv_input_layout=layout, num_key_value_heads=n2,
                                                    scale_value=0.5, **lens)
    dout = rnd(*out.shape, seed=133).half()
    out.backward(dout)
    grads = torch_npu.npu_block_sparse_attention_backward(dout, q.detach(), k.detach(), v.detach(), out.detach(),
                                                          lse, mask, [64, 128], [130], [140], layout, layout, n2, 0.5)
    for got, leaf in zip(grads, (q, k, v)):
        assert got.shape == leaf.shape and got.dtype == leaf.dtype
        assert_close(got.float(), leaf.grad.float(), atol=3e-3, rtol=3e-3)


# --- NSA ----------------------------------------------------------------------------------

def test_nsa_compress_and_grad():
    x = rnd(40, 2, 8, seed=140).half().requires_grad_()
    w = rnd(8, 2, seed=141).half().requires_grad_()
    out = torch_npu.npu_nsa_compress(x, w, 8, 4, actual_seq_len=[15, 40])
    windows = [s for s in range(0, 15 - 8 + 1, 4)] + [15 + s for s in range(0, 25 - 8 + 1, 4)]
    assert out.shape == (len(windows), 2, 8) and out.dtype == torch.float16
    for r, start in enumerate(windows):
        want = sum(x[start + i].double() * w[i].double().unsqueeze(-1) for i in range(8))
        assert_close(out[r].double(), want, atol=3e-3, rtol=3e-3)
    g = rnd(*out.shape, seed=142).half()
    out.backward(g)
    dx, dw = torch_npu.npu_nsa_compress_grad(g, x.detach(), w.detach(), 8, 4, actual_seq_len=[15, 40])
    assert_close(dx.float(), x.grad.float(), atol=3e-3, rtol=3e-3)
    assert_close(dw.float(), w.grad.float(), atol=3e-2, rtol=3e-3)
    assert_close(torch_npu.npu_nsa_compress(x.detach().npu(), w.detach().npu(), 8, 4, actual_seq_len=[15, 40]).cpu(),
                 out.detach())


def test_nsa_compress_attention():
    q = rnd(7, 4, 8, seed=150).half()
    k, v = rnd(11, 2, 8, seed=151).half(), rnd(11, 2, 6, seed=152).half()
    cmp_bs, stride, sel_bs, count = 32, 16, 64, 3
    m, nn = sel_bs // stride, cmp_bs // stride
    amask = torch.triu(torch.ones(4, 7, dtype=torch.bool), diagonal=3)
    tmask = torch.zeros(4, 5, dtype=torch.bool)
    tmask[:, 0] = True
    out, topk, smax, ssum = torch_npu.npu_nsa_compress_attention(
        q, k, v, 0.4, 4, cmp_bs, stride, sel_bs, count, topk_mask=tmask, atten_mask=amask, actual_seq_qlen=[4, 7],
        actual_cmp_seq_kvlen=[7, 11], actual_sel_seq_kvlen=[5, 9])
    assert out.shape == (7, 4, 6) and topk.shape == (7, 2, count) and topk.dtype == torch.int32
    assert smax.shape == ssum.shape == (7, 4, 8)
    for (qa, qb), (ka, kb), nsel in [((0, 4), (0, 7), 5), ((4, 7), (7, 11), 4)]:
        for t in range(qa, qb):
            i = t - qa
            probs = []
            for h in range(4):
                logits = k[ka:kb, h // 2].double() @ q[t, h].double() * 0.4
                logits = logits - 40000.0 * amask[i, :kb - ka].double()
                p = torch.softmax(logits, 0)
                probs.append(p)
                assert_close(out[t, h].double(), p @ v[ka:kb, h // 2].double(), atol=3e-3, rtol=3e-3)
                assert_close(smax[t, h].double(), logits.max().expand(8), atol=1e-3, rtol=1e-4)
            for g in range(2):
                score = []
                for blk in range(nsel):
                    total = 0.0
                    for j in range(m + nn - 1):
                        pos = m * (blk + 1) - j
                        times = min(j + 1 if j < (m + nn - 1) / 2 else m + nn - 1 - j, nn)
                        if 0 <= pos < kb - ka:
                            total += times * float(probs[2 * g][pos] + probs[2 * g + 1][pos])
                    score.append(23333.0 if tmask[i, blk] else total)
                order = sorted(range(nsel), key=lambda b: (-score[b], b))[:count]
                assert topk[t, g].tolist() == order


def select_ref(q, k, v, idx, bs, scale, start, length, causal_pos=None):
    """One token: head h attends to the blocks idx[h // G] of its sequence (float64)."""
    g = q.shape[0] // k.shape[1]
    out = torch.zeros(q.shape[0], v.shape[-1], dtype=torch.float64)
    for h in range(q.shape[0]):
        pos = [start + b * bs + o for b in idx[h // g].tolist() for o in range(bs)
               if b * bs + o < length and (causal_pos is None or b * bs + o <= causal_pos)]
        p = torch.softmax(k[pos, h // g].double() @ q[h].double() * scale, 0)
        out[h] = p @ v[pos, h // g].double()
    return out


@pytest.mark.parametrize("masked", [False, True])
def test_nsa_select_attention_and_grad(masked):
    q = rnd(6, 4, 8, seed=160).half().requires_grad_()
    k = rnd(40, 2, 8, seed=161).half().requires_grad_()
    v = rnd(40, 2, 4, seed=162).half().requires_grad_()
    idx = torch.tensor([[[0, 1], [1, 0]], [[1, 0], [0, 1]], [[0, 1], [1, 0]], [[2, 0], [0, 1]], [[1, 2], [2, 0]],
                        [[0, 2], [1, 2]]], dtype=torch.int32)
    mask = torch.ones(4, 4, dtype=torch.bool) if masked else None
    lens = dict(atten_mask=mask, actual_seq_qlen=[3, 6], actual_seq_kvlen=[16, 40])
    out, smax, ssum = torch_npu.npu_nsa_select_attention(q, k, v, idx, 0.5, 4, 8, 2, **lens)
    assert out.shape == (6, 4, 4) and smax.shape == (6, 4, 8)
    for t in range(6):
        b = 0 if t < 3 else 1
        start, length, s1 = (0, 16, t) if b == 0 else (16, 24, t - 3)
        want = select_ref(q[t], k, v, idx[t], 8, 0.5, start, length, s1 if masked else None)
        assert_close(out[t].double(), want, atol=3e-3, rtol=3e-3)
    g = rnd(*out.shape, seed=163).half()
    out.backward(g)
    grads = torch_npu.npu_nsa_select_attention_grad(g, q.detach(), k.detach(), v.detach(), out.detach(), smax, ssum,
                                                    idx, 0.5, 4, 8, 2, **lens)
    for got, leaf in zip(grads, (q, k, v)):
        assert_close(got.float(), leaf.grad.float(), atol=4e-3, rtol=4e-3)



@pytest.mark.parametrize("layout", ["BSH", "TND", "BSND"])
def test_nsa_select_attention_infer_paged(layout):
    b, n1, n2, d, dv, pbs = 3, 4, 2, 8, 6, 16
    q = rnd(b, n1, d, seed=180).half()
    k, v = rnd(8, pbs, n2, d, seed=181).half(), rnd(8, pbs, n2, dv, seed=182).half()
    table = torch.tensor([[5, 2, -1], [0, 7, 3], [6, -1, -1]], dtype=torch.int32)
    lens = [30, 41, 9]
    idx = torch.tensor([[[1, 0], [0, -1]], [[2, 4], [5, 1]], [[0, -1], [1, 0]]], dtype=torch.int32)
    if layout == "BSH":
        args = (q.view(b, 1, n1 * d), k.view(8, pbs, n2 * d), v.view(8, pbs, n2 * dv))
    elif layout == "TND":
        args = (q, k.view(8, pbs, n2 * d), v.view(8, pbs, n2 * dv))
    else:
        args = (q.view(b, 1, n1, d), k, v)
    out = torch_npu.npu_nsa_select_attention_infer(*args, idx, 0.3, n1, n2, 8, 2, pbs, layout=layout,
                                                   block_table=table, actual_seq_kvlen=lens)
    want_shape = {"BSH": (b, 1, n1 * dv), "TND": (b, n1, dv), "BSND": (b, 1, n1, dv)}[layout]
    assert out.shape == want_shape and out.dtype == torch.float16
    out = out.reshape(b, n1, dv)
    for bi in range(b):
        keys, vals = paged(k, table[bi], lens[bi]), paged(v, table[bi], lens[bi])
        for h in range(n1):
            pos = sparse_positions(idx[bi, h // 2], 8, lens[bi], lambda p: True)
            want, _, _ = ref_attention_row(q[bi, h:h + 1], keys[pos, h // 2], vals[pos, h // 2], 0.3)
            assert_close(out[bi, h].double(), want[0], atol=3e-3, rtol=3e-3)


def test_nsa_compress_infer_writes_compression_points():
    pbs, cbs, stride = 16, 8, 4
    x = rnd(6, pbs, 2, 4, seed=190).half()
    w = rnd(cbs, 2, seed=191).half()
    table = torch.tensor([[3, 1], [0, 5], [2, 4]], dtype=torch.int32)
    cache = torch.zeros(5, 2, 4).half()
    slots = torch.tensor([4, 0, 2], dtype=torch.int32)
    lens = [20, 7, 12]  # 20 and 12 are compression points, 7 is shorter than a block
    got = torch.ops.npu.npu_nsa_compress_infer(x, w, slots, cbs, stride, pbs, block_table=table, actual_seq_len=lens,
                                               cache=cache)
    assert got is cache
    for b, slot in ((0, 4), (2, 2)):
        tokens = paged(x, table[b], lens[b])[-cbs:]
        want = sum(tokens[i].double() * w[i].double().unsqueeze(-1) for i in range(cbs))
        assert_close(cache[slot].double(), want, atol=3e-3, rtol=3e-3)
    assert (cache[[0, 1, 3]] == 0).all()


def test_mla_prolog_v3_block_cache_modes():
    x, w, sin, cos = mla_inputs(5)
    ref = mla_ref(x, w, sin, cos)
    # 2-D tokens: sequences of 3 and 2 tokens (cumulative actual_seq_len), a block list per sequence
    kv, kr = torch.zeros(6, 2, 1, 32).bfloat16(), torch.zeros(6, 2, 1, 16).bfloat16()
    torch_npu.npu_mla_prolog_v3(x, *w.values(), sin, cos, kv, kr, cache_index=torch.tensor([4, 1, 5]),
                                actual_seq_len=torch.tensor([3, 5], dtype=torch.int32), cache_mode="PA_BLK_BSND")
    for t, (block, off) in enumerate([(4, 0), (4, 1), (1, 0), (5, 0), (5, 1)]):
        close_bf16(kv[block, off, 0], ref[t][3])
        close_bf16(kr[block, off, 0], ref[t][4])
    # 3-D tokens (B = 1, S = 5): cache_index (B, ceil(S / block_size))
    kv2 = torch.zeros(6, 2, 1, 32).bfloat16()
    torch_npu.npu_mla_prolog_v3(x.view(1, 5, 64), *w.values(), sin.view(1, 5, 16), cos.view(1, 5, 16), kv2,
                                torch.zeros(6, 2, 1, 16).bfloat16(), cache_index=torch.tensor([[3, 0, 2]]),
                                cache_mode="PA_BLK_BSND")
    for t, (block, off) in enumerate([(3, 0), (3, 1), (0, 0), (0, 1), (2, 0)]):
        close_bf16(kv2[block, off, 0], ref[t][3])


# --- argument errors ----------------------------------------------------------------------

def _li_args():
    q, key, w, table, cq, lk = paged_case(0)
    return q, key, w, dict(actual_seq_lengths_query=cq, actual_seq_lengths_key=lk, block_table=table,
                           layout_query="TND", layout_key="PA_BSND")


def _mla_call(**overrides):
    x, w, sin, cos = mla_inputs(2)
    args = dict(token_x=x, rope_sin=sin, rope_cos=cos, kv_cache=torch.zeros(1, 16, 1, 32).bfloat16(),
                kr_cache=torch.zeros(1, 16, 1, 16).bfloat16(), cache_index=torch.tensor([0, 1]), **w)
    args.update(overrides)
    return torch_npu.npu_mla_prolog_v3(**args)


def _li_call(**kw):
    q, key, w, base = _li_args()
    base.update(kw)
    return torch_npu.npu_lightning_indexer(q, key, w, **base)


def _sfa_call(**kw):
    q, k = rnd(1, 2, 2, 8, seed=1).half(), rnd(1, 4, 1, 8, seed=2).half()
    idx = torch.zeros(1, 2, 1, 2, dtype=torch.int32)
    args = dict(query=q, key=k, value=k, sparse_indices=idx, scale_value=0.1)
    args.update(kw)
    return torch_npu.npu_sparse_flash_attention(**args)


def _bsa_call(**kw):
    q = rnd(1, 2, 4, 8, seed=3).half()
    args = dict(query=q, key=q, value=q, block_sparse_mask=torch.ones(1, 2, 1, 1, dtype=torch.int8),
                block_shape=[64, 128], q_input_layout="BNSD", kv_input_layout="BNSD", num_key_value_heads=2)
    args.update(kw)
    return torch_npu.npu_block_sparse_attention(**args)


ERRORS = [
    ("li-layout", lambda: _li_call(layout_query="BNSD"), "layout should be 'BSND' or 'TND'"),
    ("li-no-table", lambda: _li_call(block_table=None), "needs block_table"),
    ("li-count", lambda: _li_call(sparse_count=0), "sparse_count should be greater than 0"),
    ("li-tokens", lambda: _li_call(pre_tokens=5), "pre_tokens and next_tokens support only"),
    ("li-mode", lambda: _li_call(sparse_mode=2), "sparse_mode should be one of"),
    ("li-tnd-lens", lambda: _li_call(actual_seq_lengths_query=None), "is required for layout TND"),
    ("li-weights", lambda: torch_npu.npu_lightning_indexer(*_li_args()[:2], torch.zeros(5, 3).bfloat16(),
                                                           **_li_args()[3]), "weights should have shape"),
    ("li-dtype", lambda: torch_npu.npu_lightning_indexer(torch.zeros(1, 1, 4, 8), torch.zeros(1, 2, 1, 8),
                                                         torch.zeros(1, 1, 4)), "float16 or bfloat16"),
    ("qli-dtype", lambda: torch_npu.npu_quant_lightning_indexer(
        torch.zeros(1, 1, 4, 8).half(), torch.zeros(1, 2, 1, 8).half(), torch.zeros(1, 1, 4).half(),
        torch.ones(1, 1, 4).half(), torch.ones(1, 2, 1).half(), 0, 0), "int8 or float8_e4m3fn"),
    ("qli-hif8", lambda: torch_npu.npu_quant_lightning_indexer(
        torch.zeros(1, 1, 4, 8, dtype=torch.int8), torch.zeros(1, 2, 1, 8, dtype=torch.int8),
        torch.zeros(1, 1, 4).half(), torch.ones(1, 1, 4).half(), torch.ones(1, 2, 1).half(), 0, 0, query_dtype=34),
     "should both be torch_npu.hifloat8"),
    ("qli-hif8-bytes", lambda: torch_npu.npu_quant_lightning_indexer(
        torch.zeros(1, 1, 4, 8).half(), torch.zeros(1, 2, 1, 8).half(), torch.zeros(1, 1, 4).half(),
        torch.ones(1, 1, 4).half(), torch.ones(1, 2, 1).half(), 0, 0, query_dtype=torch_npu.hifloat8,
        key_dtype=torch_npu.hifloat8), "uint8 / int8 bytes"),
    ("kvq-hif8-pair", lambda: torch_npu.npu_kv_quant_sparse_flash_attention(
        torch.zeros(1, 1, 2, 320).bfloat16(), torch.zeros(1, 4, 1, 392, dtype=torch.uint8),
        torch.zeros(1, 4, 1, 392, dtype=torch.uint8), torch.zeros(1, 1, 1, 2, dtype=torch.int32), 0.1, 2, 2,
        key_dtype=torch_npu.hifloat8), "key_dtype and value_dtype should both"),
    ("sfa-mode", lambda: _sfa_call(sparse_mode=1), "sparse_mode should be one of"),
    ("sfa-dtype", lambda: _sfa_call(value=torch.zeros(1, 4, 1, 8).bfloat16()), "share one dtype"),
    ("sfa-rope", lambda: _sfa_call(query_rope=torch.zeros(1, 2, 2, 4).half()), "given together"),
    ("sfa-sinks", lambda: _sfa_call(sinks=torch.zeros(3)), "sinks should be float32 of shape"),
    ("sfa-indices", lambda: _sfa_call(sparse_indices=torch.zeros(1, 2, 3, 2, dtype=torch.int32)),
     "sparse_indices should have shape"),
    ("sfa-layouts", lambda: _sfa_call(layout_kv="TND"), "should equal layout_query"),
    ("kvq-width", lambda: torch_npu.npu_kv_quant_sparse_flash_attention(
        torch.zeros(1, 1, 2, 320).bfloat16(), torch.zeros(1, 4, 1, 300, dtype=torch.int8),
        torch.zeros(1, 4, 1, 300, dtype=torch.int8), torch.zeros(1, 1, 1, 2, dtype=torch.int32), 0.1, 2, 2),
     "key's last dimension should be 392"),
    ("kvq-mode", lambda: torch_npu.npu_kv_quant_sparse_flash_attention(
        torch.zeros(1, 1, 2, 320).bfloat16(), torch.zeros(1, 4, 1, 392, dtype=torch.int8),
        torch.zeros(1, 4, 1, 392, dtype=torch.int8), torch.zeros(1, 1, 1, 2, dtype=torch.int32), 0.1, 1, 2),
     "support only 2"),
    ("mla-dim", lambda: _mla_call(token_x=torch.zeros(1, 1, 2, 64).bfloat16()), "token_x dim num should be 2 or 3"),
    ("mla-hif8", lambda: _mla_call(weight_quant_mode=5), "not supported on vNPU"),
    ("mla-mode", lambda: _mla_call(cache_mode="ND"), "cache_mode should be one of"),
    ("mla-dtypes", lambda: _mla_call(weight_quant_mode=2), "needs token_x, weight_dq"),
    ("mla-kvq3", lambda: _mla_call(kv_cache_quant_mode=3), "ckvkr_repo_mode=1"),
    ("mla-kvq1", lambda: _mla_call(kv_cache_quant_mode=1), "needs quant_scale_ckv"),
    ("mla-index", lambda: _mla_call(cache_index=None), "needs cache_index"),
    ("mla-v2-int8", lambda: torch_npu.npu_mla_prolog_v2(
        *mla_inputs(2)[:1], *mla_inputs(2)[1].values(), *mla_inputs(2)[2:], torch.tensor([0, 1]),
        torch.zeros(1, 16, 1, 32, dtype=torch.int8), torch.zeros(1, 16, 1, 16).bfloat16()), "needs quant_scale_ckv"),
    ("bsa-precise", lambda: _bsa_call(query=torch.zeros(1, 2, 4, 8).bfloat16()), "inner_precise must be 0"),
    ("bsa-shape", lambda: _bsa_call(block_shape=[64, 64]), "multiple of 128"),
    ("bsa-layout", lambda: _bsa_call(kv_input_layout="TND"), "should both be 'TND' or both 'BNSD'"),
    ("bsa-mask", lambda: _bsa_call(block_sparse_mask=torch.ones(1, 1, 1, 1, dtype=torch.int8)),
     "block_sparse_mask should have shape"),
    ("nsa-weight", lambda: torch_npu.npu_nsa_compress(torch.zeros(8, 2, 4).half(), torch.zeros(4, 3).half(), 4, 4,
                                                      actual_seq_len=[8]), "weight should be"),
    ("nsa-heads", lambda: torch_npu.npu_nsa_select_attention(
        torch.zeros(2, 2, 4).half(), torch.zeros(8, 1, 4).half(), torch.zeros(8, 1, 4).half(),
        torch.zeros(2, 1, 1, dtype=torch.int32), 1.0, 3, 8, 1, actual_seq_qlen=[2], actual_seq_kvlen=[8]),
     "head_num 3 should equal"),
    ("nsa-topk", lambda: torch_npu.npu_nsa_select_attention(
        torch.zeros(2, 2, 4).half(), torch.zeros(8, 1, 4).half(), torch.zeros(8, 1, 4).half(),
        torch.zeros(2, 1, 2, dtype=torch.int32), 1.0, 2, 8, 1, actual_seq_qlen=[2], actual_seq_kvlen=[8]),
     "topk_indices should be"),
]


@pytest.mark.parametrize("call,match", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_bad_arguments_raise(call, match):
    with pytest.raises(RuntimeError, match=match):
        call()


# --- tracing ------------------------------------------------------------------------------

def test_fake_tensor_shapes():
    with FakeTensorMode():
        q, key, w = torch.empty(5, 4, 16).bfloat16(), torch.empty(6, 16, 1, 16).bfloat16(), torch.empty(5, 4)
        table = torch.zeros(2, 2, dtype=torch.int32)
        lens = dict(actual_seq_lengths_query=torch.zeros(2, dtype=torch.int32),
                    actual_seq_lengths_key=torch.zeros(2, dtype=torch.int32))
        idx, val = torch_npu.npu_lightning_indexer(q, key, w.bfloat16(), block_table=table, layout_query="TND",
                                                   layout_key="PA_BSND", sparse_count=2048, **lens)
        assert idx.shape == (5, 1, 2048) and idx.dtype == torch.int32 and val.shape == (0,)
        out, mx, sm = torch_npu.npu_sparse_flash_attention(
            q, key, key, idx[..., :8], 0.1, block_table=table,
            actual_seq_lengths_query=lens["actual_seq_lengths_query"],
            actual_seq_lengths_kv=lens["actual_seq_lengths_key"], layout_query="TND", layout_kv="PA_BSND",
            return_softmax_lse=True)
        assert out.shape == (5, 4, 16) and mx.shape == sm.shape == (1, 5, 4) and mx.dtype == torch.float32
        qi8 = torch.empty(2, 3, 4, 16, dtype=torch.int8)
        out = torch_npu.npu_quant_lightning_indexer(qi8, torch.empty(2, 7, 1, 16, dtype=torch.int8),
                                                    torch.empty(2, 3, 4).half(), torch.empty(2, 3, 4).half(),
                                                    torch.empty(2, 7, 1).half(), 0, 0, sparse_count=16)
        assert out.shape == (2, 3, 1, 16)


def test_torch_compile_eager_backend():
    def f(x, w, q, k, idx):
        comp = torch.ops.npu.npu_nsa_compress(x, w, 4, 2, actual_seq_len=[10])
        att = torch.ops.npu.npu_sparse_flash_attention(q, k, k, idx, 0.5, sparse_mode=0)[0]
        return comp, att

    args = (rnd(10, 2, 8, seed=170).half(), rnd(4, 2, seed=171).half(), rnd(1, 2, 2, 8, seed=172).half(),
            rnd(1, 6, 1, 8, seed=173).half(), torch.tensor([[[[0, 5, -1]], [[3, 1, 2]]]], dtype=torch.int32))
    for got, want in zip(torch.compile(f, backend="eager")(*args), f(*args)):
        assert torch.equal(got, want)
