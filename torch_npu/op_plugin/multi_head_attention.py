"""npu_multi_head_attention: fairseq's multi-head attention on flat inputs
(the MultiHeadAttention kernel behind torch_npu.contrib's MultiheadAttention).

query (B * T, E), key and value (B * S, E), weights (N * D, E) as nn.Linear
stores them, attn_mask additive and broadcastable to (B, N, T, S):

    q = (query Wq^T + bq) * D^-0.5,  k = key Wk^T + bk,  v = value Wv^T + bv   -> (B, N, len, D)
    scores  = softmax(q k^T + attn_mask)         float32 when softmax_use_float
    probs   = scores * keep / (1 - dropout_prob)  in the activations' dtype
    context = probs v -> (B * T, N * D)
    y       = context Wo^T + bo

Returns (y, dropout_mask, q, k, v, scores, probs, context), the tuple real
torch_npu returns (its backward operator takes the same intermediates).
Gradients come from autograd through these ATen operators.

dropout_mask: the mask it returns holds element-wise keep flags (uint8,
1 = kept, shape (B, N, T, S)). A given mask is either such flags (bool or
uint8, B * N * T * S elements) or a packed bit mask as _npu_dropout /
npu_dropout_gen_mask make (uint8, one bit per score: op_plugin/backward.py),
told apart by its size; without one a new one is drawn from torch's
generator when dropout_prob > 0, and all ones otherwise.
"""

import torch
import torch.nn.functional as F

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define
from torch_npu.op_plugin.backward import _mask_bytes, _unpack_keep


def npu_multi_head_attention(query, key, value, query_weight, key_weight, value_weight, attn_mask,
                             out_proj_weight, query_bias, key_bias, value_bias, out_proj_bias, dropout_mask,
                             attn_head_num, attn_dim_per_head, src_len, tgt_len, dropout_prob, softmax_use_float):
    fn = "npu_multi_head_attention"
    heads, dim = attn_head_num, attn_dim_per_head
    check(query.dim() == 2 and key.dim() == 2 and value.dim() == 2,
          f"{fn}: query, key and value should be 2-D (batch * len, embed_dim), got {query.dim()}, {key.dim()} "
          f"and {value.dim()} dimensions.")
    check(tgt_len > 0 and src_len > 0 and query.shape[0] % tgt_len == 0,
          f"{fn}: query has {query.shape[0]} rows, not a multiple of tgt_len {tgt_len}.")
    batch = query.shape[0] // tgt_len
    check(key.shape[0] == batch * src_len and value.shape[0] == batch * src_len,
          f"{fn}: key and value should have batch * src_len = {batch * src_len} rows, got {key.shape[0]} and "
          f"{value.shape[0]}.")
    width = heads * dim
    for name, w in (("query_weight", query_weight), ("key_weight", key_weight), ("value_weight", value_weight)):
        check(w.dim() == 2 and w.shape[0] == width,
              f"{fn}: {name} should have attn_head_num * attn_dim_per_head = {width} rows, got {list(w.shape)}.")
    check(0.0 <= dropout_prob < 1.0, f"{fn}: dropout_prob should be in [0, 1), got {dropout_prob}.")
    dtype = query.dtype

    def project(x, w, b, length):
        y = F.linear(x, w.to(dtype), None if b is None else b.to(dtype))
        return y.view(batch, length, heads, dim).transpose(1, 2).contiguous()

    q = project(query, query_weight, query_bias, tgt_len) * (dim ** -0.5)
    k = project(key, key_weight, key_bias, src_len)
    v = project(value, value_weight, value_bias, src_len)
    scores = torch.matmul(q, k.transpose(-2, -1)) + attn_mask.to(dtype)
    scores = F.softmax(scores, dim=-1, dtype=torch.float32 if softmax_use_float else dtype)
    shape = (batch, heads, tgt_len, src_len)
    scores_count = batch * heads * tgt_len * src_len
    if dropout_mask is not None and dropout_mask.numel() == scores_count:
        keep = dropout_mask.reshape(shape).to(torch.uint8)
    elif dropout_mask is not None:
        check(dropout_mask.dtype == torch.uint8 and dropout_mask.numel() in (-(-scores_count // 8),
                                                                            _mask_bytes(scores_count)),
              f"{fn}: dropout_mask should hold one keep flag per score ({scores_count} elements) or one bit per "
              f"score (a packed uint8 mask of {_mask_bytes(scores_count)} bytes), got {dropout_mask.numel()} "
              f"{dropout_mask.dtype} elements.")
        keep = _unpack_keep(fn, dropout_mask, shape, torch.uint8)
    elif dropout_prob > 0:
        keep = (torch.rand(shape, device=query.device) >= dropout_prob).to(torch.uint8)
    else:
        keep = torch.ones(shape, dtype=torch.uint8, device=query.device)
    probs = scores.to(dtype)
    if dropout_prob > 0 or dropout_mask is not None:
        probs = probs * keep.to(dtype) / (1.0 - dropout_prob)
    context = torch.matmul(probs, v).transpose(1, 2).reshape(batch * tgt_len, width)
    y = F.linear(context, out_proj_weight.to(dtype), None if out_proj_bias is None else out_proj_bias.to(dtype))
    return y, keep, q, k, v, scores, probs, context


define("npu_multi_head_attention(Tensor query, Tensor key, Tensor value, Tensor query_weight, Tensor key_weight, "
       "Tensor value_weight, Tensor attn_mask, Tensor out_proj_weight, Tensor? query_bias, Tensor? key_bias, "
       "Tensor? value_bias, Tensor? out_proj_bias, Tensor? dropout_mask, int attn_head_num, int attn_dim_per_head, "
       "int src_len, int tgt_len, float dropout_prob, bool softmax_use_float) "
       "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", npu_multi_head_attention)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
