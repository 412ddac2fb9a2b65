"""``torch_npu.npu_fusion_attention_graph``: the fused attention as a pair of
graph operators, ``npu_graph::npu_fa`` and ``npu_graph::npu_fa_backward``.

``npu_fusion_attention`` returns Python ints (the dropout seed, offset and
mask length), which a traced graph cannot carry between its forward and
backward; these operators return them as one-element int64 tensors instead,
and have meta kernels, so ``torch.compile`` and ``make_fx`` trace them as
single nodes. An autograd.Function joins the two (real torch_npu's
``NpuGraphAttentionFunction``).

Real torch_npu's convention, kept: ``scale`` here divides the scores (the
operators pass ``1 / scale`` to ``npu_fusion_attention``'s multiplying scale,
forward and backward alike).
"""

import torch
from torch.autograd import Function

import torch_npu

__all__ = ["npu_fusion_attention_graph"]

_MAX = 2147483647
_LIB = torch.library.Library("npu_graph", "DEF")
_LIB.define(
    "npu_fa(Tensor query, Tensor key, Tensor value, int head_num, str input_layout, Tensor? pse=None, "
    "Tensor? padding_mask=None, Tensor? atten_mask=None, float scale=1., float keep_prob=1., "
    "int pre_tockens=2147483647, int next_tockens=2147483647, int inner_precise=0, int[]? prefix=None, "
    "int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, "
    "bool sync=False, str softmax_layout=\"\", Tensor? sink=None) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)")
_LIB.define(
    "npu_fa_backward(Tensor query, Tensor key, Tensor value, Tensor dy, int head_num, str input_layout, *, "
    "Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, Tensor? softmax_max=None, "
    "Tensor? softmax_sum=None, Tensor? softmax_in=None, Tensor? attention_in=None, float scale_value=1., "
    "float keep_prob=1., int pre_tockens=2147483647, int next_tockens=2147483647, int inner_precise=0, "
    "Tensor? seed=None, Tensor? offset=None, Tensor? numels=None, int[]? prefix=None, int[]? actual_seq_qlen=None, "
    "int[]? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, bool sync=False, "
    "str softmax_layout=\"\", Tensor? sink=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)")


def _as_int(value):
    return int(value.item()) if isinstance(value, torch.Tensor) else int(value or 0)


def _fa(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None, scale=1.0,
        keep_prob=1.0, pre_tockens=_MAX, next_tockens=_MAX, inner_precise=0, prefix=None, actual_seq_qlen=None,
        actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True, sync=False, softmax_layout="", sink=None):
    out, softmax_max, softmax_sum, softmax_out, seed, offset, numels = torch_npu.npu_fusion_attention(
        query, key, value, head_num, input_layout, pse=pse, padding_mask=padding_mask, atten_mask=atten_mask,
        scale=1.0 / scale, keep_prob=keep_prob, pre_tockens=pre_tockens, next_tockens=next_tockens,
        inner_precise=inner_precise, prefix=prefix, actual_seq_qlen=actual_seq_qlen,
        actual_seq_kvlen=actual_seq_kvlen, sparse_mode=sparse_mode, gen_mask_parallel=gen_mask_parallel, sync=sync,
        softmax_layout=softmax_layout, sink=sink)
    return (out, softmax_max, softmax_sum, softmax_out) + tuple(torch.tensor([v]) for v in (seed, offset, numels))


def _fa_backward(query, key, value, dy, head_num, input_layout, *, pse=None, padding_mask=None, atten_mask=None,
                 softmax_max=None, softmax_sum=None, softmax_in=None, attention_in=None, scale_value=1.0,
                 keep_prob=1.0, pre_tockens=_MAX, next_tockens=_MAX, inner_precise=0, seed=None, offset=None,
                 numels=None, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                 gen_mask_parallel=True, sync=False, softmax_layout="", sink=None):
    dq, dk, dv, dpse = torch_npu.npu_fusion_attention_grad(
        query, key, value, dy, head_num, input_layout, pse=pse, padding_mask=padding_mask, atten_mask=atten_mask,
        softmax_max=softmax_max, softmax_sum=softmax_sum, softmax_in=softmax_in, attention_in=attention_in,
        scale_value=1.0 / scale_value, keep_prob=keep_prob, pre_tockens=pre_tockens, next_tockens=next_tockens,
        inner_precise=inner_precise, seed=_as_int(seed), offset=_as_int(offset), numels=_as_int(numels),
        prefix=prefix, actual_seq_qlen=actual_seq_qlen, actual_seq_kvlen=actual_seq_kvlen, sparse_mode=sparse_mode,
        gen_mask_parallel=gen_mask_parallel, sync=sync, softmax_layout=softmax_layout, sink=sink)
    return dq, dk, dv, dpse, query.new_empty([])  # dsink: there is no sink (npu_fusion_attention refuses one)


def _batch_heads_sequences(query, key, head_num, layout):
    """(B, N, Sq, Skv) of a BNSD, BSH/BSND or SBH layout."""
    if layout == "BSH" or layout == "BSND":
        return query.size(0), head_num, query.size(1), key.size(1)
    if layout == "SBH":
        return query.size(1), head_num, query.size(0), key.size(0)
    return query.size(0), head_num, query.size(2), key.size(2)


def _fa_meta(query, key, value, head_num, input_layout, *args, **kwargs):
    b, n, sq, _ = _batch_heads_sequences(query, key, head_num, input_layout)
    stats = query.new_empty([b, n, sq, 8], dtype=torch.float32)
    counters = [torch.empty([1], dtype=torch.int64, device="meta") for _ in range(3)]
    return (torch.empty_like(query, memory_format=torch.contiguous_format), stats, torch.empty_like(stats),
            query.new_empty([0]), *counters)


def _fa_backward_meta(query, key, value, dy, head_num, input_layout, *, pse=None, sink=None, **kwargs):
    dpse = torch.empty_like(pse) if pse is not None else None
    dsink = query.new_empty([]) if sink is None else torch.empty_like(sink)
    return (torch.empty_like(query, memory_format=torch.contiguous_format),
            torch.empty_like(key, memory_format=torch.contiguous_format),
            torch.empty_like(value, memory_format=torch.contiguous_format), dpse, dsink)


_LIB.impl("npu_fa", _fa, "PrivateUse1")
_LIB.impl("npu_fa_backward", _fa_backward, "PrivateUse1")
_LIB.impl("npu_fa", _fa_meta, "Meta")
_LIB.impl("npu_fa_backward", _fa_backward_meta, "Meta")

# forward's arguments after (query, key, value), in order
_OPTION_NAMES = ("head_num", "input_layout", "pse", "padding_mask", "atten_mask", "scale", "keep_prob", "pre_tockens",
                 "next_tockens", "inner_precise", "prefix", "actual_seq_qlen", "actual_seq_kvlen", "sparse_mode",
                 "gen_mask_parallel", "sync")


class NpuGraphAttentionFunction(Function):
    """npu_fa forward, npu_fa_backward backward, the forward's statistics and
    dropout counters saved between them."""

    @staticmethod
    def forward(ctx, query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None,
                scale=1.0, keep_prob=1.0, pre_tockens=_MAX, next_tockens=_MAX, inner_precise=0, prefix=None,
                actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True, sync=False):
        options = dict(zip(_OPTION_NAMES, (head_num, input_layout, pse, padding_mask, atten_mask, scale, keep_prob,
                                           pre_tockens, next_tockens, inner_precise, prefix, actual_seq_qlen,
                                           actual_seq_kvlen, sparse_mode, gen_mask_parallel, sync)))
        results = torch.ops.npu_graph.npu_fa(query, key, value, **options)
        ctx.save_for_backward(query, key, value, pse, padding_mask, atten_mask, *results)
        ctx.options = {k: v for k, v in options.items() if k not in ("pse", "padding_mask", "atten_mask")}
        return results

    @staticmethod
    def backward(ctx, grad_out, *unused_grads):
        query, key, value, pse, padding_mask, atten_mask, out, softmax_max, softmax_sum, softmax_out, seed, offset, \
            numels = ctx.saved_tensors
        options = dict(ctx.options)
        head_num, input_layout, scale = options.pop("head_num"), options.pop("input_layout"), options.pop("scale")
        dq, dk, dv, dpse, _ = torch.ops.npu_graph.npu_fa_backward(
            query, key, value, grad_out, head_num, input_layout, pse=pse, padding_mask=padding_mask,
            atten_mask=atten_mask, softmax_max=softmax_max, softmax_sum=softmax_sum, softmax_in=softmax_out,
            attention_in=out, scale_value=scale, seed=seed, offset=offset, numels=numels, **options)
        return (dq, dk, dv, None, None, dpse if pse is not None else None) + (None,) * (len(_OPTION_NAMES) - 3)


def npu_fusion_attention_graph(query, key, value, head_num, input_layout, pse=None, padding_mask=None,
                               atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=_MAX, next_tockens=_MAX,
                               inner_precise=0, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None,
                               sparse_mode=0, gen_mask_parallel=True, sync=False):
    """npu_fusion_attention's seven results, differentiable, as graph operators
    (module docstring); ``scale`` divides the scores."""
    return NpuGraphAttentionFunction.apply(query, key, value, head_num, input_layout, pse, padding_mask, atten_mask,
                                           scale, keep_prob, pre_tockens, next_tockens, inner_precise, prefix,
                                           actual_seq_qlen, actual_seq_kvlen, sparse_mode, gen_mask_parallel, sync)


torch_npu.npu_fusion_attention_graph = npu_fusion_attention_graph
