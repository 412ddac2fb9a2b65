"""MoE token permutation with a routing map, the permute / unpermute gradients,
and the remaining MoE helpers of op-plugin:

- npu_moe_token_permute_with_routing_map (+ _grad), npu_moe_token_unpermute_with_routing_map
  (+ _npu_moe_token_unpermute_with_routing_map, + _grad): MindSpeed's
  ``mindspeed/te/pytorch/permutation.py`` (Megatron's mask-map permutation);
- npu_moe_token_permute_grad (+ _v2), npu_moe_token_unpermute_grad (+ _v2),
  _npu_moe_token_unpermute: the gradients of vNPU's npu_moe_token_permute /
  npu_moe_token_unpermute (op_plugin/moe.py);
- npu_moe_gating_top_k_softmax_v2, npu_moe_gating_top_k_backward (the backward of
  op_plugin/moe_routing.py's npu_moe_gating_top_k), npu_moe_init_routing_quant (on
  moe_routing's npu_moe_init_routing_v2), npu_moe_update_expert.

Conventions (aclnnMoeTokenPermuteWithRoutingMap / ...Unpermute... and their grads):

- routing_map is (tokens, experts), bool or int8. Without drop_and_pad the permuted
  rows are the routed (token, expert) pairs in expert-major order (each expert's tokens
  ascending), ``num_out_tokens // tokens * tokens`` of them; ``sorted_indices[i]`` is the
  permuted row of the i-th pair in token-major order (argsort of the rows' tokens), so
  the unpermute sums rows ``sorted_indices[i * topk:(i + 1) * topk]`` into token i. An
  entry of -1 in sorted_indices (an unused slot) is skipped. Rows beyond the routed
  pairs (num_out_tokens larger than the map's count) are zeros.
- With drop_and_pad each expert gets ``capacity = num_out_tokens // experts`` slots
  filled by a stable descending sort of its routing-map column: its routed tokens in
  order, then (when it has fewer) the first tokens it does not route, exactly as the
  kernel's formula ``argsort(routingMap.T, dim=-1)[:, :capacity]``; sorted_indices then
  holds each slot's token.
- permuted_probs follow the permuted rows (``probs.T.masked_select(routing_map.T)``,
  or each slot's (token, expert) probability).

The *_grad operators compute what autograd of the forward gives (the forwards are
compositions of ATen gathers, so autograd differentiates them directly, as
op-plugin's derivatives.yaml does with these grads). vNPU's npu_moe_token_permute
returns ``sorted_indices`` as the stable argsort of the flattened expert indices
(row r holds choice ``sorted_indices[r]``); npu_moe_token_permute_grad(_v2) and
npu_moe_token_unpermute_grad(_v2) read it the same way. Sums accumulate in float32.
Shapes never depend on tensor values, so the ops trace under FakeTensor / torch.compile.
"""

import torch

from torch_npu.op_plugin import moe, moe_routing
from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def _unsupported(fn, what, reason):
    raise RuntimeError(f"{fn}: {what} is not supported on vNPU: {reason}.")


def _shape(t):
    return list(t.shape)


def _check_map(fn, routing_map, tokens=None, experts=None):
    check(routing_map.dim() == 2, f"{fn}: routing_map should be 2-dimensional (tokens, experts), got shape "
          f"{_shape(routing_map)}.")
    check(routing_map.dtype in (torch.bool, torch.int8),
          f"{fn}: routing_map should be bool or int8, got {routing_map.dtype}.")
    if tokens is not None:
        check(routing_map.shape[0] == tokens, f"{fn}: routing_map has {routing_map.shape[0]} rows but there are "
              f"{tokens} tokens.")
    if experts is not None:
        check(routing_map.shape[1] == experts, f"{fn}: routing_map has {routing_map.shape[1]} columns but there are "
              f"{experts} experts.")


def _check_probs(fn, probs, routing_map, name="probs"):
    check(probs.dtype in _FLOATS, f"{fn}: {name} should be float16, bfloat16 or float32, got {probs.dtype}.")
    check(routing_map is not None, f"{fn}: {name} needs routing_map (which token goes to which expert).")
    check(probs.shape == routing_map.shape, f"{fn}: {name} of shape {_shape(probs)} should have routing_map's shape "
          f"{_shape(routing_map)}.")


def _routed_pairs(routing_map, rows):
    """The first `rows` routed (token, expert) pairs in expert-major order, as
    (flat index e * tokens + t, valid): stable-sorting the transposed map puts
    the routed pairs first, each expert's tokens ascending. Rows past the
    routed count are not valid (their index points at an unrouted pair)."""
    flat = routing_map.t().reshape(-1).to(torch.bool)
    order = torch.sort((~flat).to(torch.int8), stable=True).indices[:rows]
    valid = torch.arange(order.numel(), device=order.device) < flat.sum()
    return order, valid


def _float_acc(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


# ---------------------------------------------------------------- permute / unpermute with a routing map


def npu_moe_token_permute_with_routing_map(tokens, routing_map, probs=None, num_out_tokens=None, drop_and_pad=False):
    """(permuted_tokens, permuted_probs or None, sorted_indices int32)."""
    fn = "npu_moe_token_permute_with_routing_map"
    check(tokens.dim() == 2, f"{fn}: tokens should be 2-dimensional (tokens, hidden), got shape {_shape(tokens)}.")
    _check_map(fn, routing_map, tokens=tokens.shape[0])
    if probs is not None:
        _check_probs(fn, probs, routing_map)
    n, experts = routing_map.shape
    num_out = n if num_out_tokens is None else num_out_tokens
    check(num_out >= 0, f"{fn}: num_out_tokens should be >= 0, got {num_out}.")
    if drop_and_pad:
        capacity = num_out // experts if experts else 0
        check(capacity <= n, f"{fn}: num_out_tokens {num_out} gives capacity {capacity} per expert, more than the "
              f"{n} tokens.")
        slots = torch.sort(routing_map.t().to(torch.int8), dim=-1, descending=True, stable=True).indices[:, :capacity]
        token_of = slots.reshape(-1)
        permuted = tokens.index_select(0, token_of)
        permuted_probs = probs.t().gather(1, slots).reshape(-1) if probs is not None else None
        return permuted, permuted_probs, token_of.to(torch.int32)

    topk = num_out // n if n else 0
    check(topk <= experts, f"{fn}: num_out_tokens {num_out} asks for {topk} experts per token, but routing_map has "
          f"{experts}.")
    out_rows = topk * n
    order, valid = _routed_pairs(routing_map, out_rows)
    token_of = order % n if n else order
    permuted = torch.where(valid.unsqueeze(-1), tokens.index_select(0, token_of), torch.zeros((), dtype=tokens.dtype,
                                                                                               device=tokens.device))
    permuted_probs = None
    if probs is not None:
        permuted_probs = torch.where(valid, probs.t().reshape(-1).index_select(0, order),
                                     torch.zeros((), dtype=probs.dtype, device=probs.device))
    # sorted_indices[i]: the row of the i-th routed pair in token-major order
    sorted_indices = torch.sort(torch.where(valid, token_of, n), stable=True).indices
    return permuted, permuted_probs, sorted_indices.to(torch.int32)


def npu_moe_token_permute_with_routing_map_grad(permuted_token_out_grad, probs_grad, sorted_indices, routing_map,
                                                experts_num, tokens_num, drop_and_pad):
    """(tokens_grad (tokens_num, hidden), probs_grad (tokens_num, experts_num) or None):
    the gradient of npu_moe_token_permute_with_routing_map."""
    fn = "npu_moe_token_permute_with_routing_map_grad"
    grad = permuted_token_out_grad
    check(grad.dim() == 2, f"{fn}: permuted_token_out_grad should be 2-dimensional (rows, hidden), got shape "
          f"{_shape(grad)}.")
    check(sorted_indices.dim() == 1 and sorted_indices.dtype in (torch.int32, torch.int64),
          f"{fn}: sorted_indices should be a 1-dimensional int32 tensor, got {sorted_indices.dtype} of shape "
          f"{_shape(sorted_indices)}.")
    rows = grad.shape[0]
    check(sorted_indices.numel() == rows, f"{fn}: sorted_indices has {sorted_indices.numel()} entries but "
          f"permuted_token_out_grad has {rows} rows.")
    _check_map(fn, routing_map, tokens=tokens_num, experts=experts_num)
    if probs_grad is not None:
        check(probs_grad.dim() == 1 and probs_grad.numel() == rows,
              f"{fn}: probs_grad should be 1-dimensional with {rows} entries (one per permuted row), got shape "
              f"{_shape(probs_grad)}.")
    acc = _float_acc(grad.dtype)
    tokens_grad = torch.zeros(tokens_num, grad.shape[1], dtype=acc, device=grad.device)
    probs_out = None
    if drop_and_pad:
        check(experts_num > 0 and rows % experts_num == 0,
              f"{fn}: with drop_and_pad the {rows} rows should be experts_num ({experts_num}) * capacity.")
        token_of = sorted_indices.long()
        tokens_grad = tokens_grad.index_add(0, token_of, grad.to(acc))
        if probs_grad is not None:
            expert_of = torch.arange(rows, device=grad.device) // (rows // experts_num)
            probs_out = torch.zeros(tokens_num * experts_num, dtype=_float_acc(probs_grad.dtype), device=grad.device)
            probs_out = probs_out.index_add(0, token_of * experts_num + expert_of, probs_grad.to(probs_out.dtype))
            probs_out = probs_out.view(tokens_num, experts_num).to(probs_grad.dtype)
        return tokens_grad.to(grad.dtype), probs_out

    order, valid = _routed_pairs(routing_map, rows)
    check(order.numel() == rows, f"{fn}: routing_map has {tokens_num * experts_num} (token, expert) pairs, fewer "
          f"than the {rows} permuted rows.")
    keep = valid.unsqueeze(-1)
    tokens_grad = tokens_grad.index_add(0, order % tokens_num, torch.where(keep, grad.to(acc), 0.0))
    if probs_grad is not None:
        probs_out = torch.zeros(experts_num * tokens_num, dtype=_float_acc(probs_grad.dtype), device=grad.device)
        probs_out = probs_out.index_add(0, order, torch.where(valid, probs_grad.to(probs_out.dtype), 0.0))
        probs_out = probs_out.view(experts_num, tokens_num).t().contiguous().to(probs_grad.dtype)
    return tokens_grad.to(grad.dtype), probs_out


def _unpermute_checks(fn, permuted_tokens, sorted_indices, restore_shape, probs, routing_map, drop_and_pad):
    check(permuted_tokens.dim() == 2, f"{fn}: permuted_tokens should be 2-dimensional (rows, hidden), got shape "
          f"{_shape(permuted_tokens)}.")
    check(permuted_tokens.dtype in _FLOATS, f"{fn}: permuted_tokens should be float16, bfloat16 or float32, got "
          f"{permuted_tokens.dtype}.")
    check(sorted_indices.dim() == 1 and sorted_indices.dtype in (torch.int32, torch.int64),
          f"{fn}: sorted_indices should be a 1-dimensional int32 tensor, got {sorted_indices.dtype} of shape "
          f"{_shape(sorted_indices)}.")
    check(len(restore_shape) == 2 and restore_shape[1] == permuted_tokens.shape[1],
          f"{fn}: restore_shape should be [tokens, hidden] with hidden = {permuted_tokens.shape[1]}, got "
          f"{list(restore_shape)}.")
    if routing_map is not None:
        _check_map(fn, routing_map, tokens=restore_shape[0])
    if probs is not None:
        _check_probs(fn, probs, routing_map)
    k = sorted_indices.numel()
    if drop_and_pad:
        check(permuted_tokens.shape[0] == k, f"{fn}: with drop_and_pad permuted_tokens should have one row per slot "
              f"({k}, sorted_indices' length), got {permuted_tokens.shape[0]}.")
    else:
        tokens = restore_shape[0]
        check(tokens > 0 and k % tokens == 0, f"{fn}: sorted_indices' length {k} should be tokens * topk with tokens "
              f"= {tokens} (restore_shape[0]).")


def _npu_moe_token_unpermute_with_routing_map(permuted_tokens, sorted_indices, restore_shape, probs=None,
                                              routing_map=None, drop_and_pad=False):
    """(unpermuted_tokens, out_index, permuted_token_id, permute_probs or None)."""
    fn = "npu_moe_token_unpermute_with_routing_map"
    restore_shape = [int(v) for v in restore_shape]
    _unpermute_checks(fn, permuted_tokens, sorted_indices, restore_shape, probs, routing_map, drop_and_pad)
    tokens, hidden = restore_shape
    k = sorted_indices.numel()
    device = permuted_tokens.device
    acc = _float_acc(permuted_tokens.dtype)
    idx = sorted_indices.long()
    if drop_and_pad:
        token_of = idx
        rows = permuted_tokens.to(acc)
        permute_probs = None
        if probs is not None:
            experts = probs.shape[1]
            check(k % experts == 0, f"{fn}: with drop_and_pad sorted_indices' length {k} should be experts "
                  f"({experts}) * capacity.")
            expert_of = torch.arange(k, device=device) // (k // experts)
            permute_probs = probs[token_of, expert_of]
            rows = rows * permute_probs.to(acc).unsqueeze(-1)
        out = torch.zeros(tokens, hidden, dtype=acc, device=device).index_add(0, token_of, rows)
        permuted_token_id, out_index = torch.sort(sorted_indices, stable=True)
        return out.to(permuted_tokens.dtype), out_index.to(sorted_indices.dtype), permuted_token_id, permute_probs

    topk = k // tokens
    used = idx >= 0  # -1: an unused slot
    row = idx.clamp(min=0)
    picked = permuted_tokens.index_select(0, row).to(acc)
    permute_probs = None
    if probs is not None:
        order, valid = _routed_pairs(routing_map, k)
        check(order.numel() == k, f"{fn}: routing_map has fewer (token, expert) pairs than the {k} permuted rows.")
        permute_probs = torch.where(valid, probs.t().reshape(-1).index_select(0, order),
                                    torch.zeros((), dtype=probs.dtype, device=device))
        picked = picked * permute_probs.index_select(0, row).to(acc).unsqueeze(-1)
    picked = torch.where(used.unsqueeze(-1), picked, 0.0)
    out = picked.view(tokens, topk, hidden).sum(1)
    token_id = (torch.arange(k, device=device) // topk).to(sorted_indices.dtype)
    return out.to(permuted_tokens.dtype), sorted_indices.clone(), token_id, permute_probs


def npu_moe_token_unpermute_with_routing_map(permuted_tokens, sorted_indices, restore_shape, probs=None,
                                             routing_map=None, drop_and_pad=False):
    return _npu_moe_token_unpermute_with_routing_map(permuted_tokens, sorted_indices, restore_shape, probs,
                                                     routing_map, drop_and_pad)[0]


def npu_moe_token_unpermute_with_routing_map_grad(unpermuted_tokens_grad, out_index, permuted_token_id, routing_map,
                                                  permuted_tokens, probs, drop_and_pad, restore_shape):
    """(permuted_tokens_grad (len(out_index), hidden), probs_grad (probs' shape) or None): the
    gradient of npu_moe_token_unpermute_with_routing_map. out_index / permuted_token_id are
    _npu_moe_token_unpermute_with_routing_map's (drop_and_pad), or sorted_indices twice."""
    fn = "npu_moe_token_unpermute_with_routing_map_grad"
    grad = unpermuted_tokens_grad
    check(grad.dim() == 2, f"{fn}: unpermuted_tokens_grad should be 2-dimensional (tokens, hidden), got shape "
          f"{_shape(grad)}.")
    for name, t in (("out_index", out_index), ("permuted_token_id", permuted_token_id)):
        check(t.dim() == 1 and t.dtype in (torch.int32, torch.int64),
              f"{fn}: {name} should be a 1-dimensional int32 tensor, got {t.dtype} of shape {_shape(t)}.")
    check(out_index.shape == permuted_token_id.shape, f"{fn}: out_index {_shape(out_index)} and permuted_token_id "
          f"{_shape(permuted_token_id)} should have one shape.")
    tokens, hidden = grad.shape
    k = out_index.numel()
    device = grad.device
    if routing_map is not None:
        _check_map(fn, routing_map, tokens=tokens)
    if probs is not None:
        _check_probs(fn, probs, routing_map)
        check(permuted_tokens is not None and list(permuted_tokens.shape) == [k, hidden],
              f"{fn}: probs needs permuted_tokens of shape {[k, hidden]}, got "
              f"{None if permuted_tokens is None else _shape(permuted_tokens)}.")
    acc = _float_acc(grad.dtype)
    g = grad.to(acc)
    probs_grad = None
    if drop_and_pad:
        slot, token_of = out_index.long(), permuted_token_id.long()
        per_slot = g.index_select(0, token_of)  # the unweighted gradient of each slot
        weighted = per_slot
        if probs is not None:
            experts = probs.shape[1]
            check(k % experts == 0, f"{fn}: with drop_and_pad out_index's length {k} should be experts ({experts}) "
                  f"* capacity.")
            expert_of = slot // (k // experts)
            weighted = per_slot * probs[token_of, expert_of].to(acc).unsqueeze(-1)
            dots = (per_slot * permuted_tokens.index_select(0, slot).to(acc)).sum(-1)
            probs_grad = torch.zeros(probs.numel(), dtype=acc, device=device)
            probs_grad = probs_grad.index_add(0, token_of * experts + expert_of, dots).view(probs.shape)
        out = torch.zeros(k, hidden, dtype=acc, device=device).index_add(0, slot, weighted)
        return out.to(grad.dtype), None if probs_grad is None else probs_grad.to(grad.dtype)

    check(tokens > 0 and k % tokens == 0, f"{fn}: out_index's length {k} should be tokens * topk with tokens = "
          f"{tokens}.")
    topk = k // tokens
    idx = out_index.long()
    used = (idx >= 0).unsqueeze(-1)
    row = idx.clamp(min=0)
    per_choice = g.repeat_interleave(topk, dim=0)  # choice i belongs to token i // topk
    weighted = per_choice
    if probs is not None:
        order, valid = _routed_pairs(routing_map, k)
        check(order.numel() == k, f"{fn}: routing_map has fewer (token, expert) pairs than the {k} permuted rows.")
        row_probs = torch.where(valid, probs.t().reshape(-1).index_select(0, order), torch.zeros(
            (), dtype=probs.dtype, device=device))
        weighted = per_choice * row_probs.index_select(0, row).to(acc).unsqueeze(-1)
        dots = torch.where(used[:, 0], (per_choice * permuted_tokens.index_select(0, row).to(acc)).sum(-1), 0.0)
        by_row = torch.zeros(k, dtype=acc, device=device).index_add(0, row, dots)
        flat = torch.zeros(probs.numel(), dtype=acc, device=device).index_add(0, order, torch.where(valid, by_row,
                                                                                                    0.0))
        probs_grad = flat.view(probs.shape[1], tokens).t().contiguous().to(grad.dtype)
    out = torch.zeros(k, hidden, dtype=acc, device=device).index_add(0, row, torch.where(used, weighted, 0.0))
    return out.to(grad.dtype), probs_grad


# ---------------------------------------------------------------- gradients of npu_moe_token_permute / unpermute


def _topk_of(indices):
    return 1 if indices.dim() == 1 else indices.shape[1]


def _permute_grad(fn, grad, sorted_indices, tokens, dtype, topk, padded_mode):
    check(not padded_mode, f"{fn}: padded_mode=True is not supported (npu_moe_token_permute supports only False).")
    check(grad.dim() == 2, f"{fn}: grad_permuted_tokens should be 2-dimensional (rows, hidden), got shape "
          f"{_shape(grad)}.")
    check(sorted_indices.dim() == 1 and sorted_indices.dtype in (torch.int32, torch.int64),
          f"{fn}: sorted_indices should be a 1-dimensional int32 tensor, got {sorted_indices.dtype} of shape "
          f"{_shape(sorted_indices)}.")
    check(topk >= 1, f"{fn}: num_topK should be >= 1, got {topk}.")
    rows = grad.shape[0]
    check(rows <= sorted_indices.numel() <= tokens * topk,
          f"{fn}: sorted_indices' length {sorted_indices.numel()} should be between the {rows} permuted rows and "
          f"tokens * topk = {tokens * topk}.")
    acc = _float_acc(grad.dtype)
    token_of = sorted_indices[:rows].long() // topk  # row r holds choice sorted_indices[r]
    out = torch.zeros(tokens, grad.shape[1], dtype=acc, device=grad.device).index_add(0, token_of, grad.to(acc))
    return out.to(dtype)


def npu_moe_token_permute_grad(tokens, grad_permuted_tokens, indices, sorted_indices, padded_mode=False):
    fn = "npu_moe_token_permute_grad"
    check(tokens.dim() == 2, f"{fn}: tokens should be 2-dimensional, got shape {_shape(tokens)}.")
    check(indices.dim() in (1, 2) and indices.shape[0] == tokens.shape[0],
          f"{fn}: indices should be (tokens,) or (tokens, topk) with tokens = {tokens.shape[0]}, got "
          f"{_shape(indices)}.")
    return _permute_grad(fn, grad_permuted_tokens, sorted_indices, tokens.shape[0], tokens.dtype, _topk_of(indices),
                         padded_mode)


def npu_moe_token_permute_grad_v2(grad_permuted_tokens, sorted_indices, tokens_size_0, tokens_dtype, num_topK,
                                  padded_mode=False):
    return _permute_grad("npu_moe_token_permute_grad_v2", grad_permuted_tokens, sorted_indices, tokens_size_0,
                         tokens_dtype, num_topK, padded_mode)


def _unpermute_grad(fn, grad, sorted_indices, rows, dtype, probs, padded_mode, permuted_tokens):
    check(not padded_mode, f"{fn}: padded_mode=True is not supported (npu_moe_token_unpermute supports only False).")
    check(grad.dim() == 2, f"{fn}: grad_unpermuted_tokens should be 2-dimensional (tokens, hidden), got shape "
          f"{_shape(grad)}.")
    check(sorted_indices.dim() == 1 and sorted_indices.dtype in (torch.int32, torch.int64),
          f"{fn}: sorted_indices should be a 1-dimensional int32 tensor, got {sorted_indices.dtype} of shape "
          f"{_shape(sorted_indices)}.")
    tokens, hidden = grad.shape
    topk = 1
    if probs is not None:
        check(probs.dim() == 2 and probs.shape[0] == tokens, f"{fn}: probs should be (tokens, topk) with tokens = "
              f"{tokens}, got shape {_shape(probs)}.")
        topk = probs.shape[1]
        check(permuted_tokens is not None and list(permuted_tokens.shape) == [rows, hidden],
              f"{fn}: probs needs permuted_tokens of shape {[rows, hidden]}.")
    check(rows <= sorted_indices.numel() == tokens * topk,
          f"{fn}: sorted_indices should have tokens * topk = {tokens * topk} entries (at least the {rows} permuted "
          f"rows), got {sorted_indices.numel()}.")
    acc = _float_acc(grad.dtype)
    choice = sorted_indices[:rows].long()  # permuted row r is choice sorted_indices[r] (token choice // topk)
    per_row = grad.to(acc).index_select(0, choice // topk)
    grad_probs = None
    weighted = per_row
    if probs is not None:
        weighted = per_row * probs.reshape(-1).to(acc).index_select(0, choice).unsqueeze(-1)
        dots = (per_row * permuted_tokens.to(acc)).sum(-1)
        grad_probs = torch.zeros(tokens * topk, dtype=acc, device=grad.device).index_add(0, choice, dots)
        grad_probs = grad_probs.view(tokens, topk).to(probs.dtype)
    return weighted.to(dtype), grad_probs


def npu_moe_token_unpermute_grad(permuted_tokens, grad_unpermuted_tokens, sorted_indices, probs=None,
                                 padded_mode=False, restore_shape=None):
    fn = "npu_moe_token_unpermute_grad"
    check(permuted_tokens.dim() == 2, f"{fn}: permuted_tokens should be 2-dimensional, got shape "
          f"{_shape(permuted_tokens)}.")
    return _unpermute_grad(fn, grad_unpermuted_tokens, sorted_indices, permuted_tokens.shape[0],
                           permuted_tokens.dtype, probs, padded_mode, permuted_tokens)


def npu_moe_token_unpermute_grad_v2(grad_unpermuted_tokens, sorted_indices, permuted_tokens_size_0,
                                    permuted_tokens_dtype, probs=None, padded_mode=False, restore_shape=None,
                                    permuted_tokens=None):
    return _unpermute_grad("npu_moe_token_unpermute_grad_v2", grad_unpermuted_tokens, sorted_indices,
                           permuted_tokens_size_0, permuted_tokens_dtype, probs, padded_mode, permuted_tokens)


def _npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    """(npu_moe_token_unpermute's result, permuted_tokens saved for the backward
    when probs is given, else None -- as op-plugin does on current CANN)."""
    out = moe.npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs, padded_mode, restore_shape)
    return out, (permuted_tokens if probs is not None else None)


# ---------------------------------------------------------------- gating


def npu_moe_gating_top_k_softmax_v2(x, k=1, finished=None, renorm=0, output_softmax=False):
    """(y in x's dtype, expert_idx int32, softmax_result float32). renorm 0: softmax over
    all experts in float32, then the top k; renorm 1: the top k logits, then their
    softmax. Ties go to the lower expert. Rows whose `finished` flag is set get expert
    index E. softmax_result is the full softmax with renorm 0 and output_softmax, else
    an empty (0,) tensor."""
    fn = "npu_moe_gating_top_k_softmax_v2"
    renorm = 0 if renorm is None else renorm
    output_softmax = bool(output_softmax)
    check(x.dim() in (2, 3), f"{fn}: x should be 2- or 3-dimensional, got shape {_shape(x)}.")
    check(x.dtype in _FLOATS, f"{fn}: x should be float16, bfloat16 or float32, got {x.dtype}.")
    experts = x.shape[-1]
    check(0 <= k <= experts, f"{fn}: k should be in [0, {experts}] (the expert count), got {k}.")
    check(renorm in (0, 1), f"{fn}: renorm should be 0 or 1, got {renorm}.")
    if finished is not None:
        check(finished.dtype == torch.bool, f"{fn}: finished should be bool, got {finished.dtype}.")
        check(list(finished.shape) == list(x.shape[:-1]), f"{fn}: finished of shape {_shape(finished)} should be "
              f"{list(x.shape[:-1])} (x's rows).")
    logits = x.float()
    probs = torch.softmax(logits, dim=-1)
    if renorm == 0:
        idx = torch.sort(probs, dim=-1, descending=True, stable=True).indices[..., :k]
        y = probs.gather(-1, idx)
    else:
        idx = torch.sort(logits, dim=-1, descending=True, stable=True).indices[..., :k]
        y = torch.softmax(logits.gather(-1, idx), dim=-1)
    idx = idx.to(torch.int32)
    if finished is not None:
        idx = idx.masked_fill(finished.unsqueeze(-1), experts)
    softmax_result = probs if renorm == 0 and output_softmax else x.new_empty((0,), dtype=torch.float32)
    return y.to(x.dtype), idx, softmax_result


def npu_moe_gating_top_k_backward(x_norm, grad_y, expertIdx, renorm=0, norm_type=0, routed_scaling_factor=1.0,
                                  eps=1e-20):
    """d loss / d x of npu_moe_gating_top_k from its norm_out (x_norm: the softmax or
    sigmoid of x), the gradient of y and the chosen experts: y_j = s[e_j] * scale
    (softmax), or s[e_j] / (sum_j s[e_j] + eps) * scale (sigmoid)."""
    fn = "npu_moe_gating_top_k_backward"
    check(x_norm.dim() == 2, f"{fn}: x_norm should be 2-dimensional (tokens, experts), got shape {_shape(x_norm)}.")
    check(grad_y.dim() == 2 and grad_y.shape[0] == x_norm.shape[0],
          f"{fn}: grad_y should be (tokens, k) with tokens = {x_norm.shape[0]}, got shape {_shape(grad_y)}.")
    check(expertIdx.shape == grad_y.shape and expertIdx.dtype in (torch.int32, torch.int64),
          f"{fn}: expertIdx should be an int32 tensor of grad_y's shape {_shape(grad_y)}, got {expertIdx.dtype} of "
          f"shape {_shape(expertIdx)}.")
    check(renorm == 0, f"{fn}: renorm should be 0 (the only mode npu_moe_gating_top_k has), got {renorm}.")
    check(norm_type in (0, 1), f"{fn}: norm_type should be 0 (softmax) or 1 (sigmoid), got {norm_type}.")
    s = x_norm.float()
    g = grad_y.float() * routed_scaling_factor
    idx = expertIdx.long()
    if norm_type == 1:
        chosen = s.gather(1, idx)
        denom = chosen.sum(-1, keepdim=True) + eps
        g = g / denom - (g * chosen).sum(-1, keepdim=True) / (denom * denom)
    ds = torch.zeros_like(s).scatter_add(1, idx, g)
    if norm_type == 0:
        dx = s * (ds - (s * ds).sum(-1, keepdim=True))
    else:
        dx = ds * s * (1 - s)
    return dx.to(grad_y.dtype)


# ---------------------------------------------------------------- init routing quant


def npu_moe_init_routing_quant(x, expert_idx, scale=None, offset=None, active_num=1024, expert_capacity=0,
                               expert_num=256, drop_pad_mode=0, expert_tokens_num_mode=0,
                               expert_tokens_before_capacity_flag=False, quant_mode=1):
    """(expanded_x int8, expanded_row_idx int32, expert_token_cumsum_or_count int32 (expert_num,)
    or None, expert_tokens_before_capacity int32 (expert_num,) or None, expanded_scale float32
    or None): aclnnMoeInitRoutingQuantV2, computed by npu_moe_init_routing_v2 with quant_mode
    0 (static) or 1 (dynamic). The dropless statistics exist with expert_tokens_num_mode 1
    (cumsum) / 2 (count), the drop/pad per-expert counts before capacity with
    expert_tokens_before_capacity_flag; the dynamic scales with quant_mode 1."""
    fn = "npu_moe_init_routing_quant"
    check(x.dim() == 2, f"{fn}: x should be 2-dimensional (NUM_ROWS, H), got shape {_shape(x)}.")
    check(x.dtype in _FLOATS, f"{fn}: x should be float16, bfloat16 or float32, got {x.dtype}.")
    check(expert_idx.dim() == 2 and expert_idx.shape[0] == x.shape[0],
          f"{fn}: expert_idx should be 2-dimensional (NUM_ROWS, K) with NUM_ROWS = {x.shape[0]}, got shape "
          f"{_shape(expert_idx)}.")
    check(drop_pad_mode in (0, 1), f"{fn}: drop_pad_mode should be 0 or 1, got {drop_pad_mode}.")
    check(quant_mode in (0, 1), f"{fn}: quant_mode should be 0 (static) or 1 (dynamic), got {quant_mode}.")
    check(expert_tokens_num_mode in (0, 1, 2), f"{fn}: expert_tokens_num_mode should be 0, 1 or 2, got "
          f"{expert_tokens_num_mode}.")
    check(active_num >= 0 and expert_capacity >= 0 and expert_num >= 0,
          f"{fn}: active_num, expert_capacity and expert_num should be >= 0, got {active_num}, {expert_capacity}, "
          f"{expert_num}.")
    needs_experts = drop_pad_mode == 1 or expert_tokens_num_mode > 0 or (
        quant_mode == 1 and scale is not None and scale.dim() == 2 and scale.shape[0] > 1)
    if needs_experts:
        check(expert_num > 0, f"{fn}: expert_num should be > 0 with drop_pad_mode=1, expert_tokens_num_mode > 0 or "
              f"per-expert scales, got {expert_num}.")
        expert_range = [0, expert_num]
        num = expert_num
    else:  # the ids need only be >= 0 here
        expert_range, num = [0, 10240], -1
    count = drop_pad_mode == 1 and expert_tokens_before_capacity_flag or drop_pad_mode == 0 and \
        expert_tokens_num_mode > 0
    expanded_x, row_idx, tokens, expanded_scale = moe_routing.npu_moe_init_routing_v2(
        x, expert_idx.to(torch.int32), scale=scale, offset=offset, active_num=active_num,
        expert_capacity=expert_capacity if drop_pad_mode == 1 else -1, expert_num=num, drop_pad_mode=drop_pad_mode,
        expert_tokens_num_type=0 if drop_pad_mode == 0 and expert_tokens_num_mode == 1 else 1,
        expert_tokens_num_flag=count, quant_mode=quant_mode, active_expert_range=expert_range)
    cumsum_or_count = tokens.to(torch.int32) if drop_pad_mode == 0 and expert_tokens_num_mode > 0 else None
    before_capacity = tokens.to(torch.int32) if drop_pad_mode == 1 and expert_tokens_before_capacity_flag else None
    return (expanded_x, row_idx.to(expert_idx.dtype), cumsum_or_count, before_capacity,
            expanded_scale if quant_mode == 1 else None)


# ---------------------------------------------------------------- update expert


def npu_moe_update_expert(expert_ids, eplb_table, expert_scales=None, pruning_threshold=None, active_mask=None,
                          local_rank_id=-1, world_size=-1, balance_mode=0):
    """(balanced_expert_ids, balanced_active_mask bool (BS, K)). Each logical expert id e
    maps to one of its count = eplb_table[e, 0] physical placements eplb_table[e, 1:]:
    placement local_rank_id // ceil(world_size / count) (balance_mode 0) or token % count
    (balance_mode 1). With expert_scales and pruning_threshold a choice stays active when
    its scale >= threshold * (the token's scale sum) and the token is active; without
    them the mask is active_mask broadcast (all True without it)."""
    fn = "npu_moe_update_expert"
    check(expert_ids.dim() == 2 and expert_ids.dtype in (torch.int32, torch.int64),
          f"{fn}: expert_ids should be a 2-dimensional int32 or int64 tensor (BS, K), got {expert_ids.dtype} of "
          f"shape {_shape(expert_ids)}.")
    check(eplb_table.dim() == 2 and eplb_table.dtype == torch.int32 and eplb_table.shape[1] >= 2,
          f"{fn}: eplb_table should be a 2-dimensional int32 tensor (log_expert_num, F) with F >= 2, got "
          f"{eplb_table.dtype} of shape {_shape(eplb_table)}.")
    check(balance_mode in (0, 1), f"{fn}: balance_mode should be 0 (by rank) or 1 (by token), got {balance_mode}.")
    bs, k = expert_ids.shape
    if balance_mode == 0:
        check(2 <= world_size <= 768 and 0 <= local_rank_id < world_size,
              f"{fn}: balance_mode 0 needs world_size in [2, 768] and local_rank_id in [0, world_size), got "
              f"world_size={world_size}, local_rank_id={local_rank_id}.")
    check((expert_scales is None) == (pruning_threshold is None),
          f"{fn}: expert_scales and pruning_threshold should be given together.")
    check(active_mask is None or expert_scales is not None,
          f"{fn}: active_mask needs expert_scales and pruning_threshold.")
    if expert_scales is not None:
        check(list(expert_scales.shape) == [bs, k] and expert_scales.dtype in _FLOATS,
              f"{fn}: expert_scales should be a float16, bfloat16 or float32 tensor of shape {[bs, k]}, got "
              f"{expert_scales.dtype} of shape {_shape(expert_scales)}.")
        check(pruning_threshold.dtype == torch.float32 and pruning_threshold.numel() == k and
              list(pruning_threshold.shape) in ([k], [1, k]),
              f"{fn}: pruning_threshold should be a float32 tensor of shape [{k}] or [1, {k}], got "
              f"{pruning_threshold.dtype} of shape {_shape(pruning_threshold)}.")
    if active_mask is not None:
        check(active_mask.dtype == torch.bool and list(active_mask.shape) == [bs],
              f"{fn}: active_mask should be a bool tensor of shape [{bs}], got {active_mask.dtype} of shape "
              f"{_shape(active_mask)}.")
    table = eplb_table.long()
    logical = expert_ids.long()
    count = table[:, 0].index_select(0, logical.reshape(-1)).view(bs, k).clamp(min=1)
    if balance_mode == 0:
        place = local_rank_id // ((world_size + count - 1) // count)
    else:
        place = torch.arange(bs, device=expert_ids.device).unsqueeze(1) % count
    physical = table[logical, place + 1]
    active = torch.ones(bs, k, dtype=torch.bool, device=expert_ids.device)
    if active_mask is not None:
        active = active & active_mask.unsqueeze(1)
    if expert_scales is not None:
        scales = expert_scales.float()
        keep = scales >= pruning_threshold.reshape(1, k) * scales.sum(-1, keepdim=True)
        active = active & keep
    return physical.to(expert_ids.dtype), active


# ---------------------------------------------------------------- registrations

define("npu_moe_token_permute_with_routing_map(Tensor tokens, Tensor routing_map, *, Tensor? probs=None, "
       "int? num_out_tokens=None, bool drop_and_pad=False) -> (Tensor, Tensor, Tensor)",
       npu_moe_token_permute_with_routing_map)
define("npu_moe_token_permute_with_routing_map_grad(Tensor permuted_token_out_grad, Tensor? probs_grad, "
       "Tensor sorted_indices, Tensor routing_map, SymInt experts_num, SymInt tokens_num, bool drop_and_pad) "
       "-> (Tensor, Tensor)", npu_moe_token_permute_with_routing_map_grad)
define("npu_moe_token_unpermute_with_routing_map(Tensor permuted_tokens, Tensor sorted_indices, int[] restore_shape, "
       "*, Tensor? probs=None, Tensor? routing_map=None, bool drop_and_pad=False) -> Tensor",
       npu_moe_token_unpermute_with_routing_map)
define("_npu_moe_token_unpermute_with_routing_map(Tensor permuted_tokens, Tensor sorted_indices, int[] restore_shape, "
       "*, Tensor? probs=None, Tensor? routing_map=None, bool drop_and_pad=False) -> (Tensor, Tensor, Tensor, Tensor)",
       _npu_moe_token_unpermute_with_routing_map)
define("npu_moe_token_unpermute_with_routing_map_grad(Tensor unpermuted_tokens_grad, Tensor out_index, "
       "Tensor permuted_token_id, Tensor? routing_map, Tensor? permuted_tokens, Tensor? probs, bool drop_and_pad, "
       "int[] restore_shape) -> (Tensor, Tensor)", npu_moe_token_unpermute_with_routing_map_grad)
define("npu_moe_token_permute_grad(Tensor tokens, Tensor grad_permuted_tokens, Tensor indices, Tensor sorted_indices, "
       "bool padded_mode=False) -> Tensor", npu_moe_token_permute_grad)
define("npu_moe_token_permute_grad_v2(Tensor grad_permuted_tokens, Tensor sorted_indices, int tokens_size_0, "
       "ScalarType tokens_dtype, int num_topK, bool padded_mode=False) -> Tensor", npu_moe_token_permute_grad_v2)
define("npu_moe_token_unpermute_grad(Tensor permuted_tokens, Tensor grad_unpermuted_tokens, Tensor sorted_indices, "
       "Tensor? probs=None, bool padded_mode=False, int[]? restore_shape=None) -> (Tensor, Tensor)",
       npu_moe_token_unpermute_grad)
define("npu_moe_token_unpermute_grad_v2(Tensor grad_unpermuted_tokens, Tensor sorted_indices, "
       "int permuted_tokens_size_0, ScalarType permuted_tokens_dtype, Tensor? probs=None, bool padded_mode=False, "
       "int[]? restore_shape=None, Tensor? permuted_tokens=None) -> (Tensor, Tensor)",
       npu_moe_token_unpermute_grad_v2)
define("_npu_moe_token_unpermute(Tensor permuted_tokens, Tensor sorted_indices, Tensor? probs=None, "
       "bool padded_mode=False, int[]? restore_shape=None) -> (Tensor unpermuted_tokens, "
       "Tensor permuted_tokens_for_backward)", _npu_moe_token_unpermute)
define("npu_moe_gating_top_k_softmax_v2(Tensor x, *, int k=1, Tensor? finished=None, int? renorm=0, "
       "bool? output_softmax=False) -> (Tensor, Tensor, Tensor)", npu_moe_gating_top_k_softmax_v2)
define("npu_moe_gating_top_k_backward(Tensor x_norm, Tensor grad_y, Tensor expertIdx, *, int renorm=0, "
       "int norm_type=0, float routed_scaling_factor=1.0, float eps=1e-20) -> Tensor", npu_moe_gating_top_k_backward)
define("npu_moe_init_routing_quant(Tensor x, Tensor expert_idx, *, Tensor? scale=None, Tensor? offset=None, "
       "int active_num=1024, int expert_capacity=0, int expert_num=256, int drop_pad_mode=0, "
       "int expert_tokens_num_mode=0, bool expert_tokens_before_capacity_flag=False, int quant_mode=1) "
       "-> (Tensor, Tensor, Tensor, Tensor, Tensor)", npu_moe_init_routing_quant)
define("npu_moe_update_expert(Tensor expert_ids, Tensor eplb_table, *, Tensor? expert_scales=None, "
       "Tensor? pruning_threshold=None, Tensor? active_mask=None, int local_rank_id=-1, int world_size=-1, "
       "int balance_mode=0) -> (Tensor, Tensor)", npu_moe_update_expert)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
