"""Mixture-of-experts routing and grouped matmul: npu_moe_gating_top_k_softmax,
npu_moe_init_routing, npu_moe_token_permute / npu_moe_token_unpermute,
npu_grouped_matmul.

Row indices follow the Ascend kernels' k-major convention: token i's j-th
choice is row ``j * N + i`` of the expanded tokens.
"""

import torch

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define
from torch_npu.op_plugin.quant import _saturate_int8, _scale_value
from torch_npu.op_plugin.tensor_ops import _unpack_int4


def npu_moe_gating_top_k_softmax(x, finished=None, k=1):
    """(top-k softmax weights, expert indices int32, row indices int32); tokens
    whose `finished` flag is set get expert index E (no expert)."""
    fn = "npu_moe_gating_top_k_softmax"
    check(x.dim() >= 2, f"{fn}: x should be at least 2-dimensional (tokens, experts), got {list(x.shape)}.")
    experts = x.shape[-1]
    check(1 <= k <= experts, f"{fn}: k should be in [1, {experts}] (the expert count), but got {k}.")
    probs = torch.softmax(x.float(), dim=-1)
    y, idx = probs.topk(k, dim=-1)
    idx = idx.to(torch.int32)
    if finished is not None:
        check(list(finished.shape) == list(x.shape[:-1]), f"{fn}: finished of shape {list(finished.shape)} "
              f"should be {list(x.shape[:-1])}.")
        idx = idx.masked_fill(finished.bool().unsqueeze(-1), experts)
    rows = x.numel() // experts
    row_idx = torch.arange(rows * k, dtype=torch.int32, device=x.device).view(k, rows).t()
    return y.to(x.dtype), idx, row_idx.reshape(*x.shape[:-1], k).contiguous()


def npu_moe_init_routing(x, row_idx, expert_idx, active_num):
    """(expanded_x, expanded_row_idx, expanded_expert_idx): tokens copied once per
    choice and grouped by expert (stable); expanded_row_idx maps each choice's
    k-major row to its position in expanded_x; at most active_num tokens per choice."""
    fn = "npu_moe_init_routing"
    check(x.dim() == 2, f"{fn}: x should be (N, H), got {list(x.shape)}.")
    check(row_idx.shape == expert_idx.shape and row_idx.dim() == 2 and row_idx.shape[0] == x.shape[0],
          f"{fn}: row_idx {list(row_idx.shape)} and expert_idx {list(expert_idx.shape)} should both be (N, k) "
          f"with N = {x.shape[0]}.")
    n, k = expert_idx.shape
    flat_expert = expert_idx.t().reshape(-1)  # k-major, as row_idx counts
    flat_row = row_idx.t().reshape(-1).long()
    sorted_expert, order = torch.sort(flat_expert, stable=True)
    sorted_row = flat_row[order]
    expanded_row_idx = torch.empty_like(sorted_row)
    expanded_row_idx[sorted_row] = torch.arange(n * k, device=x.device)
    limit = min(n, active_num) * k
    expanded_x = x[sorted_row[:limit] % n]
    return expanded_x, expanded_row_idx.to(torch.int32), sorted_expert.to(torch.int32)


def npu_moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False):
    """(permuted_tokens, sorted_indices): tokens copied once per routed expert and sorted by expert."""
    fn = "npu_moe_token_permute"
    check(not padded_mode, f"{fn}: padded_mode=True is not supported.")
    check(indices.dim() in (1, 2) and indices.shape[0] == tokens.shape[0],
          f"{fn}: indices should be (tokens,) or (tokens, topk) with tokens = {tokens.shape[0]}, "
          f"got {list(indices.shape)}.")
    topk = indices.shape[1] if indices.dim() == 2 else 1
    sorted_indices = torch.argsort(indices.reshape(-1), stable=True)
    if num_out_tokens is not None and num_out_tokens > 0:
        sorted_indices = sorted_indices[:num_out_tokens]
    return tokens.index_select(0, sorted_indices // topk), sorted_indices.to(torch.int32)


def npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    """Scatters the expert outputs back to their tokens and sums each token's choices, weighted by probs."""
    fn = "npu_moe_token_unpermute"
    check(not padded_mode, f"{fn}: padded_mode=True is not supported.")
    topk = probs.shape[-1] if probs is not None else 1
    total = sorted_indices.numel() if probs is None else probs.numel()
    tokens = total // topk
    out = permuted_tokens.new_zeros((total, permuted_tokens.shape[-1]))
    out = out.index_copy(0, sorted_indices.long(), permuted_tokens[:sorted_indices.numel()])
    out = out.view(tokens, topk, -1)
    if probs is not None:
        out = out * probs.to(out.dtype).unsqueeze(-1)
    return out.sum(1)


def _group_sizes(group_list, group_list_type, rows, groups, fn):
    values = [int(v) for v in (group_list.tolist() if isinstance(group_list, torch.Tensor) else group_list)]
    check(len(values) == groups, f"{fn}: group_list has {len(values)} entries but there are {groups} weights.")
    sizes = values if group_list_type == 1 else [b - a for a, b in zip([0] + values, values)]
    check(all(s >= 0 for s in sizes) and sum(sizes) <= rows,
          f"{fn}: group_list {values} (group_list_type {group_list_type}) does not split the {rows} rows of x.")
    return sizes


def _per_expert(tensors, experts, name, fn):
    """A list of one tensor per expert: a single tensor with a leading expert dimension is split."""
    if not tensors:  # None or [] (no bias)
        return None
    if len(tensors) == 1 and experts > 1:
        check(tensors[0].shape[0] == experts, f"{fn}: {name} holds {tensors[0].shape[0]} experts in its first "
              f"dimension but there are {experts} weights.")
        return list(tensors[0].unbind(0))
    check(len(tensors) == experts, f"{fn}: {name} has {len(tensors)} tensors but there are {experts} weights.")
    return list(tensors)


def _antiquant_values(fn, name, t, i, k, n, int4):
    """An antiquant scale or offset for weight[i] (k, n): one value per output column, or, for int4 weights, one row
    per group of k / G weight rows, (G, n), spread over those rows."""
    if t.numel() in (1, n):
        return t.reshape(-1)
    per_group = t.dim() == 2 and t.shape[1] == n and t.shape[0] > 0 and k % t.shape[0] == 0
    check(per_group and int4, f"{fn}: {name}[{i}] of shape {list(t.shape)} should hold one value per output column "
          f"({n})" + (f" or one row per group of weight rows, (G, {n}) with G dividing k = {k}." if int4 else
                      " (per-group scales need int4 weights; int8 weights are per channel)."))
    return t.repeat_interleave(k // t.shape[0], 0)


def _dequantised_matmul(fn, i, xi, wi, bias, scale, per_token_scale, antiquant_scale, antiquant_offset, output_dtype):
    """One group's product with the quantisation arguments applied (see npu_grouped_matmul)."""
    if scale is not None or per_token_scale is not None:
        check(xi.dtype == torch.int8 and wi.dtype == torch.int8,
              f"{fn}: scale / per_token_scale dequantise an int8 x times int8 weight, but x[{i}] is {xi.dtype} "
              f"and weight[{i}] is {wi.dtype}.")
        check(output_dtype != torch.int8 or (per_token_scale is None and scale is not None),
              f"{fn}: an int8 output is requantised per channel by scale alone (per_token_scale takes a float16 or "
              f"bfloat16 output).")
        # int8 x int8 sums are exact in float64; the kernel dequantises the int32 accumulator in float32
        y = (xi.double() @ wi.double()).float()
        if bias is not None:
            y = y + bias[i].float()
        if scale is not None:
            check(scale[i].numel() in (1, wi.shape[-1]), f"{fn}: scale[{i}] of shape {list(scale[i].shape)} should "
                  f"hold one value per output column ({wi.shape[-1]}).")
            y = y * _scale_value(scale[i]).reshape(-1)
        if per_token_scale is not None:
            check(per_token_scale[i].numel() == xi.shape[0], f"{fn}: per_token_scale[{i}] should hold one value "
                  f"per row of x[{i}] ({xi.shape[0]}), but has {per_token_scale[i].numel()}.")
            y = y * per_token_scale[i].float().reshape(-1, 1)
        if output_dtype == torch.int8:
            return _saturate_int8(y)
        return y.to(output_dtype if output_dtype is not None else torch.float16)
    check(output_dtype != torch.int8, f"{fn}: an int8 output needs int8 x and weight with scale (the A8W8 form).")
    if antiquant_scale is not None:
        int4 = wi.dtype == torch.int32
        check(wi.dtype == torch.int8 or int4, f"{fn}: antiquant_scale dequantises an int8 weight or an int4 one "
              f"(int32, eight values each), but weight[{i}] is {wi.dtype}.")
        w = _unpack_int4(wi) if int4 else wi
        k, n = w.shape
        # the kernel dequantises in x's dtype, rounding after each step (op-plugin's and MindSpeed's goldens do too)
        w = w.to(xi.dtype)
        if antiquant_offset is not None:
            w = w + _antiquant_values(fn, "antiquant_offset", antiquant_offset[i], i, k, n, int4).to(xi.dtype)
        wi = w * _antiquant_values(fn, "antiquant_scale", antiquant_scale[i], i, k, n, int4).to(xi.dtype)
    y = xi @ wi
    if bias is not None:
        y = y + bias[i]
    return y.to(output_dtype) if output_dtype is not None else y


def _k_split(fn, x, weight, bias, scale, per_token_scale, antiquant_scale, group_list, group_list_type, split_item,
             output_dtype):
    """group_type 2: the contraction dimension K is split. x is one (M, K)
    tensor (typically x.t() of tokens x hidden, the tokens being K), the
    weights hold the groups' rows of one (K, N) tensor, and group i gives
    x[:, K_i] @ weight[K_i] of shape (M, N): the weight gradient of a grouped
    matmul, one per expert. split_item 2/3 stack them as (G, M, N)."""
    check(len(x) == 1, f"{fn}: group_type 2 (split along K) takes one x, but {len(x)} were given.")
    check(group_list is not None, f"{fn}: group_type 2 (split along K) needs group_list.")
    check(bias is None and scale is None and per_token_scale is None and antiquant_scale is None,
          f"{fn}: bias and the quantisation arguments are not supported with group_type 2 on vNPU.")
    x0 = x[0]
    rows = torch.cat(weight, 0) if len(weight) > 1 else weight[0]
    groups = len(group_list) if not isinstance(group_list, torch.Tensor) else group_list.shape[0]
    sizes = _group_sizes(group_list, group_list_type, x0.shape[1], groups, fn)
    check(rows.shape[0] >= sum(sizes), f"{fn}: the weights hold {rows.shape[0]} rows of K but group_list covers "
          f"{sum(sizes)}.")
    dtype = output_dtype or x0.dtype
    ys = [(xi @ wi).to(dtype) for xi, wi in zip(x0[:, :sum(sizes)].split(sizes, 1), rows[:sum(sizes)].split(sizes, 0))]
    if split_item in (2, 3):
        return [torch.stack(ys, 0)]
    return ys


def npu_grouped_matmul(x, weight, bias=None, scale=None, offset=None, antiquant_scale=None, antiquant_offset=None,
                       per_token_scale=None, group_list=None, activation_input=None, activation_quant_scale=None,
                       activation_quant_offset=None, split_item=0, group_type=None, group_list_type=0, act_type=0,
                       output_dtype=None):
    """y_i = x_i @ weight_i (+ bias_i); with one x and group_type 0 its rows are
    split by group_list. split_item 0/1 return one tensor per group, 2/3 one
    concatenated tensor. The weights may be one tensor (E, K, N), its bias
    (E, N). Quantised: int8 x and weight with scale (per output column) and
    per_token_scale (per row) give (x @ w + bias) * scale * per_token_scale
    in output_dtype (float16 by default; int64 scales carry float32 bits;
    int8 requantises per channel, scale alone); an int8 weight, or an int4
    one (int32 packing eight along N), with antiquant_scale (and
    antiquant_offset; per column, or for int4 per group of rows (G, N)) is
    dequantised to x's dtype first."""
    fn = "npu_grouped_matmul"
    check(offset is None and activation_input is None and activation_quant_scale is None
          and activation_quant_offset is None,
          f"{fn}: offset and the activation_* arguments are not supported by vNPU.")
    check(act_type == 0, f"{fn}: act_type {act_type} is not supported by vNPU (only 0, no activation).")
    check(split_item in (0, 1, 2, 3), f"{fn}: split_item should be 0, 1, 2 or 3, but got {split_item}.")
    check(len(weight) >= 1 and len(x) >= 1, f"{fn}: x and weight should be non-empty lists.")
    if len(weight) == 1 and weight[0].dim() == 3:
        weight = list(weight[0].unbind(0))
    experts = len(weight)
    bias, scale, antiquant_scale, antiquant_offset = (
        _per_expert(t, experts, name, fn) for t, name in (
            (bias, "bias"), (scale, "scale"), (antiquant_scale, "antiquant_scale"),
            (antiquant_offset, "antiquant_offset")))
    check(group_type in (None, -1, 0, 2), f"group_type only supports -1, 0 and 2, but got {group_type}")
    if group_type == 2:
        return _k_split(fn, x, weight, bias, scale, per_token_scale, antiquant_scale, group_list, group_list_type,
                        split_item, output_dtype)
    if len(x) == 1 and experts > 1 or group_list is not None:
        check(len(x) == 1, f"{fn}: group_list splits a single x, but {len(x)} were given.")
        sizes = _group_sizes(group_list, group_list_type, x[0].shape[0], experts, fn) \
            if group_list is not None else None
        check(sizes is not None, f"{fn}: one x with {experts} weights needs group_list.")
        xs = list(x[0][:sum(sizes)].split(sizes, 0))
        if per_token_scale is not None:  # one scale per row of the one x, split with it
            check(len(per_token_scale) == 1, f"{fn}: per_token_scale should hold one tensor for the one x.")
            per_token_scale = list(per_token_scale[0][:sum(sizes)].split(sizes, 0))
    else:
        check(len(x) == experts, f"{fn}: x has {len(x)} tensors but weight has {experts}.")
        xs = list(x)
        per_token_scale = _per_expert(per_token_scale, experts, "per_token_scale", fn)
    ys = []
    for i, (xi, wi) in enumerate(zip(xs, weight)):
        check(xi.shape[-1] == wi.shape[0], f"{fn}: x[{i}] of shape {list(xi.shape)} cannot multiply "
              f"weight[{i}] of shape {list(wi.shape)}.")
        ys.append(_dequantised_matmul(fn, i, xi, wi, bias, scale, per_token_scale, antiquant_scale,
                                      antiquant_offset, output_dtype))
    if split_item in (2, 3):
        return [torch.cat(ys, 0)]
    return ys

define("npu_moe_gating_top_k_softmax(Tensor x, Tensor? finished=None, int k=1) -> (Tensor, Tensor, Tensor)",
       npu_moe_gating_top_k_softmax)
define("npu_moe_init_routing(Tensor x, Tensor row_idx, Tensor expert_idx, int active_num) "
       "-> (Tensor, Tensor, Tensor)", npu_moe_init_routing)
define("npu_moe_token_permute(Tensor tokens, Tensor indices, int? num_out_tokens=None, bool padded_mode=False) "
       "-> (Tensor, Tensor)", npu_moe_token_permute)
define("npu_moe_token_unpermute(Tensor permuted_tokens, Tensor sorted_indices, Tensor? probs=None, "
       "bool padded_mode=False, int[]? restore_shape=None) -> Tensor", npu_moe_token_unpermute)
_GMM_ARGS = ("Tensor[] x, Tensor[] weight, *, Tensor[]? bias=None, Tensor[]? scale=None, Tensor[]? offset=None, "
             "Tensor[]? antiquant_scale=None, Tensor[]? antiquant_offset=None, Tensor[]? per_token_scale=None, "
             "{group_list} group_list=None, Tensor[]? activation_input=None, Tensor[]? activation_quant_scale=None, "
             "Tensor[]? activation_quant_offset=None, int? split_item=0, int? group_type=None, "
             "int? group_list_type=0, int? act_type=0, ")


def _grouped_matmul_op(x, weight, bias=None, scale=None, offset=None, antiquant_scale=None, antiquant_offset=None,
                       per_token_scale=None, group_list=None, activation_input=None, activation_quant_scale=None,
                       activation_quant_offset=None, split_item=0, group_type=None, group_list_type=0, act_type=0,
                       tuning_config=None, output_dtype=None, x_dtype=None, weight_dtype=None, scale_dtype=None,
                       per_token_scale_dtype=None):
    # op-plugin's overloads: the Tensor one takes output_dtype as an int (a
    # torch dtype or a torch_npu constant) and the packed-format dtypes of
    # its inputs; tuning_config is a kernel tiling hint, meaningless here.
    from torch_npu.op_plugin.dtype_cast import _resolve
    for name, code in (("x_dtype", x_dtype), ("weight_dtype", weight_dtype), ("scale_dtype", scale_dtype),
                       ("per_token_scale_dtype", per_token_scale_dtype)):
        check(code is None, f"npu_grouped_matmul: {name} (hifloat8 / mxfp4 inputs) is not supported on vNPU.")
    if output_dtype is not None and not isinstance(output_dtype, torch.dtype):
        output_dtype = _resolve("npu_grouped_matmul", "output_dtype", output_dtype)
    return npu_grouped_matmul(x, weight, bias, scale, offset, antiquant_scale, antiquant_offset, per_token_scale,
                              group_list, activation_input, activation_quant_scale, activation_quant_offset,
                              split_item or 0, group_type, group_list_type or 0, act_type or 0, output_dtype)


define("npu_grouped_matmul(" + _GMM_ARGS.format(group_list="Tensor?") + "int[]? tuning_config=None, "
       "int? output_dtype=None, int? x_dtype=None, int? weight_dtype=None, int? scale_dtype=None, "
       "int? per_token_scale_dtype=None) -> Tensor[]", _grouped_matmul_op, export=False)
define("npu_grouped_matmul.List(" + _GMM_ARGS.format(group_list="int[]?") + "ScalarType? output_dtype=None) "
       "-> Tensor[]", _grouped_matmul_op, export=False)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
