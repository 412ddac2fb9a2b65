"""Inference helpers vllm-ascend calls around its attention: npu_mrope
(rotary embedding read from a cos/sin cache, plain or multimodal),
npu_clipped_swiglu (GPT-OSS's clamped SwiGLU, optionally for the first
``sum(group_index)`` rows only) and npu_transpose_batchmatmul (MLA's
per-head up-projection with the transposes folded in).

All three are inference operators: op-plugin registers no backward for them
(autograd still flows through the ATen operators they are made of).
"""

import torch

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define
from torch_npu.op_plugin.quant import _saturate_int8, _scale_value

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


# --- npu_mrope -----------------------------------------------------------------

def _mrope_owner(section, half, cache_mode):
    """For each of the ``half`` frequencies, the row of ``positions`` (0 = t,
    1 = h, 2 = w, ...) whose position it is rotated by."""
    if cache_mode == "default":  # consecutive blocks: section[0] t's, then h's, ...
        owner = []
        for row, size in enumerate(section):
            owner += [row] * size
        return owner
    # 'interleave': t h w t h w ... over the first 3 * section[1] frequencies, t after.
    owner = [0] * half
    end = min(3 * section[1], half)
    owner[1:end:3] = [1] * len(range(1, end, 3))
    owner[2:end:3] = [2] * len(range(2, end, 3))
    return owner


def _mrope_rotate(x, cos, sin, head_size, rotary_dim, neox):
    """x (T, heads * head_size) rotated by cos / sin (T, rotary_dim / 2) on the
    first rotary_dim features of every head; the rest passes through."""
    t = x.shape[0]
    heads = x.view(t, -1, head_size).float()
    rot, rest = heads[..., :rotary_dim], heads[..., rotary_dim:]
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    if neox:  # the two halves of the rotary part pair up
        x1, x2 = rot.chunk(2, dim=-1)
        rot = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    else:  # neighbours (2i, 2i + 1) pair up
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
        rot = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
    return torch.cat((rot, rest), dim=-1).reshape(x.shape).to(x.dtype)


def npu_mrope(positions, query, key, cos_sin_cache, head_size, mrope_section=None, rotary_mode="half",
              cache_mode="default"):
    """RoPE with cos / sin looked up in ``cos_sin_cache`` (rows = positions,
    columns = cos then sin, rotary_dim / 2 each). 1-D positions: plain RoPE.
    (M, T) positions (M = 3 or 4, Qwen-VL's t / h / w ...): frequency j takes
    its position from row owner(j), where 'default' gives the rows
    consecutive blocks of mrope_section[i] frequencies and 'interleave'
    alternates t, h, w over the first 3 * mrope_section[1] frequencies.
    Computed in float32, returned in query's / key's dtype."""
    fn = "npu_mrope"
    rotary_mode = "half" if rotary_mode is None else rotary_mode
    cache_mode = "default" if cache_mode is None else cache_mode
    check(rotary_mode in ("half", "interleave"),
          f"{fn}: rotary_mode should be 'half' or 'interleave', but got '{rotary_mode}'.")
    check(cache_mode in ("default", "interleave"),
          f"{fn}: cache_mode should be 'default' or 'interleave', but got '{cache_mode}'.")
    check(positions.dtype in (torch.int32, torch.int64),
          f"{fn}: positions should be int32 or int64, but got {positions.dtype}.")
    check(query.dim() == 2 and key.dim() == 2,
          f"{fn}: query and key should be 2-D (num_tokens, heads * head_size), but got shapes "
          f"{list(query.shape)} and {list(key.shape)}.")
    check(query.dtype in _FLOATS, f"{fn}: query should be float16, bfloat16 or float32, but got {query.dtype}.")
    check(key.dtype == query.dtype and cos_sin_cache.dtype == query.dtype,
          f"{fn}: key and cos_sin_cache should have query's dtype {query.dtype}, but got {key.dtype} and "
          f"{cos_sin_cache.dtype}.")
    check(cos_sin_cache.dim() == 2, f"{fn}: cos_sin_cache should be 2-D (max_seq_len, rotary_dim), but got shape "
          f"{list(cos_sin_cache.shape)}.")
    rotary_dim = cos_sin_cache.shape[1]
    check(head_size > 0, f"{fn}: head_size should be positive, but got {head_size}.")
    check(rotary_dim % 2 == 0 and 0 < rotary_dim <= head_size,
          f"{fn}: the last dimension of cos_sin_cache (rotary_dim = {rotary_dim}) should be even and in "
          f"(0, head_size = {head_size}].")
    for name, t in (("query", query), ("key", key)):
        check(t.shape[1] % head_size == 0, f"{fn}: the last dimension of {name} ({t.shape[1]}) is not a multiple "
              f"of head_size {head_size}.")
    tokens = positions.shape[-1] if positions.dim() > 0 else -1
    check(query.shape[0] == tokens and key.shape[0] == tokens,
          f"{fn}: query, key and positions should have the same number of tokens, but got {query.shape[0]}, "
          f"{key.shape[0]} and positions of shape {list(positions.shape)}.")

    section = [int(s) for s in mrope_section] if mrope_section is not None else []
    half = rotary_dim // 2
    multimodal = any(s != 0 for s in section)
    if not multimodal:
        check(positions.dim() == 1, f"{fn}: positions should be 1-D (num_tokens) without mrope_section, but got "
              f"shape {list(positions.shape)}; pass mrope_section for multimodal positions.")
        check(cache_mode == "default", f"{fn}: cache_mode '{cache_mode}' needs multimodal positions "
              "(mrope_section); plain RoPE supports only 'default'.")
        table = cos_sin_cache.index_select(0, positions.long()).float()
        cos, sin = table[:, :half], table[:, half:]
    else:
        check(len(section) in (3, 4) and all(s >= 0 for s in section),
              f"{fn}: mrope_section should have 3 or 4 non-negative entries, but got {section}.")
        check(positions.dim() == 2 and positions.shape[0] == len(section),
              f"{fn}: positions should be ({len(section)}, num_tokens) for mrope_section {section}, but got shape "
              f"{list(positions.shape)}.")
        check(sum(section) == half, f"{fn}: mrope_section {section} should add up to rotary_dim / 2 = {half}.")
        if cache_mode == "interleave":
            check(len(section) == 3, f"{fn}: cache_mode 'interleave' supports 3 mrope sections, but got {section}.")
            check(section[1] == section[2], f"{fn}: cache_mode='interleave' with mrope_section={section} is not "
                  "supported on vNPU: the documented layout strides h and w by mrope_section[1] only, so sections "
                  "with mrope_section[1] != mrope_section[2] are ambiguous.")
        rows = positions.shape[0]
        table = cos_sin_cache.index_select(0, positions.reshape(-1).long()).float().view(rows, tokens, rotary_dim)
        owner = torch.tensor(_mrope_owner(section, half, cache_mode), dtype=torch.long, device=table.device)
        freq = torch.arange(half, device=table.device)
        cos = table[owner, :, freq].transpose(0, 1)  # (T, half): cos of frequency j at row owner[j]
        sin = table[owner, :, freq + half].transpose(0, 1)
    neox = rotary_mode == "half"
    return (_mrope_rotate(query, cos, sin, head_size, rotary_dim, neox),
            _mrope_rotate(key, cos, sin, head_size, rotary_dim, neox))


# --- npu_clipped_swiglu --------------------------------------------------------

def npu_clipped_swiglu(x, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0, interleaved=True):
    """GPT-OSS's SwiGLU: ``a = min(A, limit)``, ``b = clamp(B, -limit, limit)``,
    ``y = a * sigmoid(alpha * a) * (b + bias)``, in float32. The kernel views
    x as (rows, cols) = (prod(shape[:dim]), prod(shape[dim:])) and splits the
    columns into A / B: even / odd columns when interleaved, else the two
    halves. (So with trailing dimensions after ``dim``, 'interleaved' pairs
    neighbouring elements of the flattened tail, exactly as the kernel does.)
    With group_index only the first sum(group_index) rows are computed; the
    rest of y is zero here (the kernel leaves it unwritten)."""
    fn = "npu_clipped_swiglu"
    check(x.dtype in _FLOATS, f"{fn}: x should be float16, bfloat16 or float32, but got {x.dtype}.")
    check(x.dim() > 1, f"{fn}: x should have more than 1 dimension, but got shape {list(x.shape)}.")
    check(-x.dim() <= dim < x.dim(), f"{fn}: dim {dim} is out of range for x of {x.dim()} dimensions "
          f"(expected in [{-x.dim()}, {x.dim() - 1}]).")
    d = dim % x.dim()
    check(x.shape[d] % 2 == 0, f"{fn}: the size of dimension {dim} of x ({x.shape[d]}) should be even.")
    rows = 1
    for s in x.shape[:d]:
        rows *= s
    flat = x.reshape(rows, -1).float()
    if interleaved:
        a, b = flat[:, 0::2], flat[:, 1::2]
    else:
        a, b = flat.chunk(2, dim=1)
    a = a.clamp(max=limit)
    b = b.clamp(min=-limit, max=limit)
    y = a * torch.sigmoid(alpha * a) * (b + bias)
    if group_index is not None:
        check(group_index.dim() == 1 and group_index.dtype == torch.int64,
              f"{fn}: group_index should be a 1-D int64 tensor, but got {group_index.dtype} of shape "
              f"{list(group_index.shape)}.")
        valid = torch.arange(rows, device=x.device) < group_index.sum().to(x.device)
        y = torch.where(valid.unsqueeze(1), y, torch.zeros((), device=y.device, dtype=y.dtype))
    shape = list(x.shape)
    shape[d] //= 2
    return y.reshape(shape).to(x.dtype)


# --- npu_transpose_batchmatmul -------------------------------------------------

def npu_transpose_batchmatmul(input, weight, bias=None, scale=None, perm_x1=None, perm_x2=None, perm_y=None,
                              batch_split_factor=1):
    """``Y = permute(input, perm_x1) @ permute(weight, perm_x2)`` per batch,
    then ``permute(Y, perm_y)``: (B, M, K) @ (B, K, N) -> (M, B, N). The
    kernel accepts perm_x1 [0, 1, 2] / [1, 0, 2] (input (B, M, K) or
    (M, B, K)), perm_x2 [0, 1, 2] / [0, 2, 1] and perm_y [1, 0, 2] only.
    scale (the int64 / uint64 npu_trans_quant_param of B * N float32 scales)
    quantises: int8 ``round(Y * scale)`` saturated, shape (M, 1, B * N).
    batch_split_factor f > 1 returns the (M, B * N) result as (f, M, B * N / f)."""
    fn = "npu_transpose_batchmatmul"
    perm_x1 = [0, 1, 2] if perm_x1 is None else [int(p) for p in perm_x1]
    perm_x2 = [0, 1, 2] if perm_x2 is None else [int(p) for p in perm_x2]
    perm_y = [1, 0, 2] if perm_y is None else [int(p) for p in perm_y]
    factor = 1 if batch_split_factor is None else int(batch_split_factor)
    check(perm_x1 in ([0, 1, 2], [1, 0, 2]), f"{fn}: perm_x1 should be [0, 1, 2] or [1, 0, 2], but got {perm_x1}.")
    check(perm_x2 in ([0, 1, 2], [0, 2, 1]), f"{fn}: perm_x2 should be [0, 1, 2] or [0, 2, 1], but got {perm_x2}.")
    check(perm_y == [1, 0, 2], f"{fn}: perm_y should be [1, 0, 2], but got {perm_y}.")
    check(bias is None, f"{fn}: bias is not supported by TransposeBatchMatMul; pass None.")
    check(input.dim() == 3 and weight.dim() == 3, f"{fn}: input and weight should be 3-D, but got shapes "
          f"{list(input.shape)} and {list(weight.shape)}.")
    check(input.dtype in _FLOATS, f"{fn}: input should be float16, bfloat16 or float32, but got {input.dtype}.")
    check(weight.dtype == input.dtype, f"{fn}: weight dtype {weight.dtype} should be input's dtype {input.dtype}.")
    x1 = input.permute(perm_x1)  # (B, M, K)
    x2 = weight.permute(perm_x2)  # (B, K, N)
    check(x1.shape[0] == x2.shape[0] and x1.shape[2] == x2.shape[1],
          f"{fn}: input {list(input.shape)} (perm_x1 {perm_x1}) and weight {list(weight.shape)} (perm_x2 "
          f"{perm_x2}) should give (B, M, K) and (B, K, N) with the same B and K.")
    b, m, n = x1.shape[0], x1.shape[1], x2.shape[2]
    check(factor >= 1 and (b * n) % factor == 0,
          f"{fn}: batch_split_factor should be a positive divisor of B * N = {b * n}, but got {factor}.")
    if scale is not None:
        check(factor == 1, f"{fn}: batch_split_factor should be 1 with scale, but got {factor}.")
        check(scale.dtype in (torch.int64, torch.uint64),
              f"{fn}: scale should be int64 or uint64 (from npu_trans_quant_param), but got {scale.dtype}.")
        check(scale.numel() == b * n, f"{fn}: scale should have B * N = {b * n} elements, but got shape "
              f"{list(scale.shape)}.")
        y = torch.bmm(x1.float(), x2.float()).transpose(0, 1).reshape(m, 1, b * n)
        s = _scale_value(scale.view(torch.int64).reshape(-1)).to(y.device)
        return _saturate_int8(y * s)
    y = torch.bmm(x1, x2).transpose(0, 1)  # (M, B, N)
    if factor > 1:
        return y.reshape(m, factor, b * n // factor).transpose(0, 1).contiguous()
    return y.contiguous()


define("npu_mrope(Tensor positions, Tensor query, Tensor key, Tensor cos_sin_cache, int head_size, *, "
       "int[]? mrope_section=None, str? rotary_mode='half', str? cache_mode='default') -> (Tensor, Tensor)",
       npu_mrope)
define("npu_clipped_swiglu(Tensor x, *, Tensor? group_index=None, int dim=-1, float alpha=1.702, float limit=7.0, "
       "float bias=1.0, bool interleaved=True) -> Tensor", npu_clipped_swiglu)
define("npu_transpose_batchmatmul(Tensor input, Tensor weight, *, Tensor? bias=None, Tensor? scale=None, "
       "int[]? perm_x1=None, int[]? perm_x2=None, int[]? perm_y=None, int? batch_split_factor=1) -> Tensor",
       npu_transpose_batchmatmul)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
