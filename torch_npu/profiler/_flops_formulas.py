"""FLOPs formulas of the npu fused operators and of torch's matrix products.

Each counts the multiply-adds of the matrix products an operator performs,
2 FLOPs each, from its arguments' shapes (and, for attention, which scores a
sparse mode or a block mask leaves to compute); element-wise work (softmax,
activations, quantisation) is not counted, as MFU counts only the products.
Registered as the defaults of _flops_registry, each with the function it
measures.
"""

from math import prod

from torch_npu.profiler._flops_registry import register_npu_flop


# ---------------------------------------------------------------- shapes

def _shape(t):
    return tuple(int(d) for d in t.shape)


def _as_list(value):
    """A Python sequence from a list/tuple or anything whose tolist() gives one."""
    if isinstance(value, (list, tuple)):
        return list(value)
    listed = value.tolist() if hasattr(value, "tolist") else None
    if not isinstance(listed, (list, tuple)):
        raise ValueError("expected a list, a tuple or a tensor with tolist() returning a sequence")
    return listed


def _differences(cumulative):
    """Lengths from cumulative ends (trailing zeros, padding, dropped)."""
    ends = [int(v) for v in cumulative]
    while ends and ends[-1] == 0:
        ends.pop()
    return [end - start for start, end in zip([0] + ends[:-1], ends)]


def _product_flops(left_shape, right_shape, right_transposed=False):
    """2 * M * K * N of (..., K) rows times a (K, N) matrix (all leading dims of left are rows)."""
    if len(left_shape) < 2 or len(right_shape) < 2:
        raise ValueError(f"a matrix product needs operands of rank 2 or more, got {left_shape} and {right_shape}")
    rows, depth = prod(left_shape[:-1]), left_shape[-1]
    cols = right_shape[-2] if right_transposed else right_shape[-1]
    return int(2 * rows * depth * cols)


def _broadcast(a, b):
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise ValueError(f"batch dimensions {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(reversed(out))


# ---------------------------------------------------------------- attention

def _bnsd(shape, layout, heads):
    """(batch, heads, sequence, head dim) of an attention operand."""
    if layout == "BNSD":
        return tuple(shape)
    if layout == "BSND":
        b, s, n, d = shape
        return b, n, s, d
    if layout in ("BSH", "SBH"):
        b, s, h = shape if layout == "BSH" else (shape[1], shape[0], shape[2])
        if heads <= 0 or h % heads:
            raise ValueError(f"hidden size {h} is not a multiple of the head count {heads}")
        return b, heads, s, h // heads
    if layout == "TND":
        t, n, d = shape
        return None, n, t, d
    raise ValueError(f"unknown attention layout {layout!r}")


def _kv_heads(q_shape, k_shape, layout, q_heads):
    if layout == "BNSD":
        return k_shape[1]
    if layout == "BSND":
        return k_shape[2]
    if layout in ("BSH", "SBH"):
        head_dim = q_shape[-1] // q_heads
        return k_shape[-1] // head_dim
    return q_heads


def _scores(q_len, kv_len, sparse_mode, pre_tokens=None, next_tokens=None):
    """How many of the q_len x kv_len scores a sparse mode computes (continuous count, as the
    kernel's tiling does): 0 and 1 all; 2 the causal triangle from the top left; 3 from the
    bottom right; 4 the band of pre_tokens before and next_tokens after the diagonal."""
    if sparse_mode in (0, 1):
        return q_len * kv_len
    if sparse_mode == 2:
        return q_len * kv_len - kv_len * kv_len / 2 if q_len >= kv_len else q_len * q_len / 2
    if sparse_mode == 3:
        return kv_len * kv_len / 2 if q_len >= kv_len else q_len * kv_len - q_len * q_len / 2
    if sparse_mode == 4 and pre_tokens is not None and next_tokens is not None:
        offset = kv_len - q_len  # the band is aligned at the bottom right
        return sum(max(0, min(kv_len, i + offset + next_tokens + 1) - max(0, i + offset - pre_tokens))
                   for i in range(q_len))
    raise ValueError(f"no FLOPs formula for sparse_mode={sparse_mode}")


def _calculate_common_layout_flops(q_shape, k_shape, v_shape, input_layout, sparse_mode, q_heads, kv_heads):
    """2 * B * N * scores * (D + Dv): QK^T and the product with V."""
    batch, heads, q_len, q_dim = _bnsd(q_shape, input_layout, q_heads)
    _, _, kv_len, _ = _bnsd(k_shape, input_layout, kv_heads)
    v_dim = _bnsd(v_shape, input_layout, kv_heads)[3]
    return int(2 * batch * heads * _scores(q_len, kv_len, sparse_mode) * (q_dim + v_dim))


def _calculate_tnd_layout_flops(q_shape, k_shape, v_shape, actual_seq_qlen, actual_seq_kvlen, q_heads=None):
    """Packed sequences: the scores of each sequence pair, from cumulative lengths."""
    if actual_seq_qlen is None or actual_seq_kvlen is None:
        raise ValueError("the TND layout needs actual_seq_qlen and actual_seq_kvlen")
    q_lens, kv_lens = _differences(_as_list(actual_seq_qlen)), _differences(_as_list(actual_seq_kvlen))
    if len(q_lens) != len(kv_lens) or min(q_lens + kv_lens, default=0) < 0:
        raise ValueError("actual_seq_qlen and actual_seq_kvlen should be cumulative lengths of the same sequences")
    heads = q_heads or q_shape[1]
    scores = sum(q * kv for q, kv in zip(q_lens, kv_lens))
    return int(2 * heads * (q_shape[2] + v_shape[2]) * scores)


@register_npu_flop(target="torch_npu:npu_fusion_attention", is_default=True)
def npu_fusion_attention_flops(query, key, value, head_num, input_layout, pse=None, padding_mask=None,
                               atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=2147483647,
                               next_tockens=2147483647, inner_precise=0, prefix=None, actual_seq_qlen=None,
                               actual_seq_kvlen=None, sparse_mode=0, *args, **kwargs):
    q, k, v = _shape(query), _shape(key), _shape(value)
    if input_layout == "TND":
        return _calculate_tnd_layout_flops(q, k, v, actual_seq_qlen, actual_seq_kvlen)
    return _calculate_common_layout_flops(q, k, v, input_layout, sparse_mode, head_num,
                                          _kv_heads(q, k, input_layout, head_num))


@register_npu_flop(target="torch_npu:npu_fused_infer_attention_score", is_default=True)
def npu_fused_infer_attention_score_flops(query, key, value, *args, input_layout="BSH", num_heads=1,
                                          num_key_value_heads=0, actual_seq_lengths=None,
                                          actual_seq_lengths_kv=None, sparse_mode=0, **kwargs):
    q, k, v = _shape(query), _shape(key), _shape(value)
    kv_heads = num_key_value_heads or num_heads
    if input_layout == "TND":
        return _calculate_tnd_layout_flops(q, k, v, actual_seq_lengths, actual_seq_lengths_kv, num_heads)
    return _calculate_common_layout_flops(q, k, v, input_layout, sparse_mode, num_heads, kv_heads)


def _block_lengths(lengths, batch, default, cumulative):
    if lengths is None:
        return [default] * batch
    values = _differences(_as_list(lengths)) if cumulative else [int(v) for v in _as_list(lengths)]
    if cumulative is False:
        while len(values) > batch and values[-1] == 0:
            values.pop()
    if len(values) != batch or min(values, default=0) < 0:
        raise ValueError(f"expected {batch} non-negative sequence lengths, got {values}")
    return values


@register_npu_flop(target="torch_npu:npu_block_sparse_attention", is_default=True)
def npu_block_sparse_attention_flops(query, key, value, block_sparse_mask, block_shape, *, q_input_layout="TND",
                                     kv_input_layout="TND", num_key_value_heads=1, actual_seq_lengths=None,
                                     actual_seq_lengths_kv=None, **kwargs):
    """Scores of the kept (q block, kv block) pairs, each cut to its sequence's length."""
    mask = _as_list(block_sparse_mask)  # [batch][head][q block][kv block]
    batch = len(mask)
    q_heads = len(mask[0]) if batch else 1
    _, _, q_len, q_dim = _bnsd(_shape(query), q_input_layout, q_heads)
    _, _, kv_len, v_dim = _bnsd(_shape(value), kv_input_layout, num_key_value_heads)
    q_lens = _block_lengths(actual_seq_lengths, batch, q_len, q_input_layout == "TND")
    kv_lens = _block_lengths(actual_seq_lengths_kv, batch, kv_len, kv_input_layout == "TND")
    rows, cols = (int(v) for v in block_shape)

    def tokens(length, block, size):
        return max(0, min(size, length - block * size))

    scores = 0
    for b, heads in enumerate(mask):
        for head in heads:
            for i, kept in enumerate(head):
                q_tokens = tokens(q_lens[b], i, rows)
                scores += q_tokens * sum(tokens(kv_lens[b], j, cols) for j, keep in enumerate(kept) if keep)
    return int(2 * scores * (q_dim + v_dim))


# ---------------------------------------------------------------- matrix products

@register_npu_flop(target="torch_npu:npu_all_gather_base_mm", is_default=True)
def npu_all_gather_base_mm_flops(x1, x2, hcom, world_size, *args, **kwargs):
    """The product of the gathered x1 (world_size times its rows) with x2; the gather moves data only."""
    rows, depth = _shape(x1)[-2:]
    return int(2 * rows * int(world_size) * depth * _shape(x2)[-1])


@register_npu_flop(target="torch_npu:npu_transpose_batchmatmul", is_default=True)
def npu_transpose_batchmatmul_flops(input, weight, *, perm_x1=(0, 1, 2), perm_x2=(0, 1, 2), **kwargs):
    def permuted(shape, perm):
        if len(perm) != len(shape):
            raise ValueError(f"permutation {tuple(perm)} does not fit shape {shape}")
        return tuple(shape[int(i)] for i in perm)
    return _product_flops(permuted(_shape(input), perm_x1), permuted(_shape(weight), perm_x2))


def _grouped_flops(x, weight, group_list=None):
    xs = x if isinstance(x, (list, tuple)) else [x]
    ws = weight if isinstance(weight, (list, tuple)) else [weight]
    if len(xs) == len(ws):
        return sum(_product_flops(_shape(a), _shape(w)) for a, w in zip(xs, ws))
    if len(xs) != 1:
        raise ValueError(f"grouped matmul FLOPs: {len(xs)} inputs for {len(ws)} weights")
    rows_shape = _shape(xs[0])
    total = prod(rows_shape[:-1])
    if group_list is None:
        raise ValueError("grouped matmul FLOPs: split groups need group_list")
    groups = [int(v) for v in _as_list(group_list)]
    if len(groups) != len(ws):
        raise ValueError(f"grouped matmul FLOPs: {len(groups)} groups for {len(ws)} weights")
    if sum(groups) != total:  # cumulative ends rather than sizes
        groups = _differences(groups) if groups and groups[-1] == total else groups
    if sum(groups) != total:
        raise ValueError(f"grouped matmul FLOPs: group_list {groups} does not cover the {total} rows")
    return sum(_product_flops((m, rows_shape[-1]), _shape(w)) for m, w in zip(groups, ws))


@register_npu_flop(target="torch_npu:npu_grouped_matmul", is_default=True)
def npu_grouped_matmul_flops(x, weight, *args, group_list=None, **kwargs):
    return _grouped_flops(x, weight, group_list)


@register_npu_flop(target="torch_npu:npu_quant_matmul_gelu", is_default=True)
def npu_quant_matmul_gelu_flops(x1, x2, x1_scale, x2_scale, *args, **kwargs):
    return _product_flops(_shape(x1), _shape(x2))


@register_npu_flop(target="torch_npu:npu_grouped_matmul_swiglu_quant_v2", is_default=True)
def npu_grouped_matmul_swiglu_quant_v2_flops(x, weight, weight_scale, x_scale, group_list, *args, **kwargs):
    """Each token meets one expert's weight: all rows of x times one (K, N) matrix."""
    return _product_flops(_shape(x), _shape(weight))


def _routed_gmm_flops(gmm_x, gmm_weight, mm_x, mm_weight, trans_gmm_weight, trans_mm_weight):
    flops = _product_flops(_shape(gmm_x), _shape(gmm_weight), trans_gmm_weight)
    if mm_x is not None and mm_weight is not None:
        flops += _product_flops(_shape(mm_x), _shape(mm_weight), trans_mm_weight)
    return flops


@register_npu_flop(target="torch_npu:npu_alltoallv_gmm", is_default=True)
def npu_alltoallv_gmm_flops(gmm_x, gmm_weight, hcom, ep_world_size, send_counts, recv_counts, *,
                            mm_x=None, mm_weight=None, trans_gmm_weight=False, trans_mm_weight=False, **kwargs):
    return _routed_gmm_flops(gmm_x, gmm_weight, mm_x, mm_weight, trans_gmm_weight, trans_mm_weight)


@register_npu_flop(target="torch_npu:npu_gmm_alltoallv", is_default=True)
def npu_gmm_alltoallv_flops(gmm_x, gmm_weight, hcom, ep_world_size, send_counts, recv_counts, *,
                            mm_x=None, mm_weight=None, trans_gmm_weight=False, trans_mm_weight=False, **kwargs):
    return _routed_gmm_flops(gmm_x, gmm_weight, mm_x, mm_weight, trans_gmm_weight, trans_mm_weight)


@register_npu_flop(target="torch:mm", is_default=True)
def mm_flops(input, mat2, *args, **kwargs):
    return _product_flops(_shape(input), _shape(mat2))


@register_npu_flop(target="torch:bmm", is_default=True)
def bmm_flops(input, mat2, *args, **kwargs):
    return _product_flops(_shape(input), _shape(mat2))


@register_npu_flop(target="torch:addmm", is_default=True)
def addmm_flops(input, mat1, mat2, *args, **kwargs):
    return _product_flops(_shape(mat1), _shape(mat2))


@register_npu_flop(target="torch.nn.functional:linear", is_default=True)
def linear_flops(input, weight, bias=None, **kwargs):
    return _product_flops(_shape(input), _shape(weight), right_transposed=True)


@register_npu_flop(target="torch:matmul", is_default=True)
def matmul_flops(input, other, **kwargs):
    """torch.matmul's cases: dot, vector-matrix, matrix-vector, broadcast batched products."""
    a, b = _shape(input), _shape(other)
    if len(a) == 1 and len(b) == 1:
        return 2 * a[0]
    if len(a) == 1:
        return int(2 * prod(b[:-2]) * a[0] * b[-1])
    if len(b) == 1:
        return int(2 * prod(a[:-1]) * a[-1])
    return int(2 * prod(_broadcast(a[:-2], b[:-2])) * a[-2] * a[-1] * b[-1])
