"""The BERT fused attention forwards: npu_fused_attention_layernorm_qkv_fwd,
npu_fused_attention_score_fwd and npu_fused_attention_score.

Together they are one BERT self-attention layer on flat (B * S, H) hidden
states, as real torch_npu's contrib ``npu_fused_attention_with_layernorm``
chains them:

- layernorm_qkv_fwd: ``norm = LayerNorm(x)``; q, k, v = ``norm @ kernel + bias``
  (kernels (H, H), input-major), each viewed (B, S, N, D) and permuted to
  (B, N, S, D). Returns [norm, q, k, v, mean, variance]: the per-row mean
  (B * S, 1), as native_layer_norm returns it, and the biased variance
  (B * S,), as torch.var returns it; real torch_npu's test compares the two
  with exactly those, shapes included.
- score_fwd: ``probs = softmax(q k^T * scale + mask)``, dropped out with
  keep_prob, ``context = probs v`` permuted back to (B * S, N * D). Returns
  (context, probs before dropout, drop_mask), the mask one uint8 keep flag per
  score, flat (B * N * S * S); keep_prob = 1 keeps all.
- score: the context alone, differentiable.

Gradients come from autograd through the composition (real torch_npu pairs
these with npu_fused_attention_score_grad / npu_fused_attention_qkv_grad).
The *_transpose flags, which let the Ascend kernel read pre-transposed
operands, are not supported on vNPU (their layouts are not documented).
"""

import torch

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define


def npu_fused_attention_layernorm_qkv_fwd(x, kernel_query, kernel_key, kernel_value, gamma, beta, bias_query=None,
                                          bias_key=None, bias_value=None, seq_len=128, num_heads=12, eps=1e-05):
    fn = "npu_fused_attention_layernorm_qkv_fwd"
    check(seq_len != 0 or num_heads != 0, "seq_len and num_heads cannot be equal to 0.")
    check(x.dim() >= 2, f"x must be at least 2 dimensions, but got {x.dim()}")
    check(x.dim() == 2, f"{fn}: x should be (batch * seq_len, hidden), got shape {list(x.shape)}.")
    check(seq_len > 0 and num_heads > 0 and x.shape[0] % seq_len == 0 and x.shape[1] % num_heads == 0,
          f"In {fn}, x.size(0) should be divisible by seq_len"
          "and x.size(1) should be divisible by num_heads.")
    rows, hidden = x.shape
    for name, k in (("kernel_query", kernel_query), ("kernel_key", kernel_key), ("kernel_value", kernel_value)):
        check(k.dim() == 2 and k.shape[0] == hidden,
              f"{fn}: {name} should be (hidden={hidden}, out), got {list(k.shape)}.")
    norm, _, _ = torch.native_layer_norm(x, [hidden], gamma, beta, eps)
    mean = x.float().mean(-1, keepdim=True).to(x.dtype)
    variance = x.float().var(-1, unbiased=False).to(x.dtype)
    layers = []
    for kernel, bias in ((kernel_query, bias_query), (kernel_key, bias_key), (kernel_value, bias_value)):
        y = torch.matmul(norm, kernel)
        if bias is not None:
            y = y + bias
        layers.append(y.view(rows // seq_len, seq_len, num_heads, -1).permute(0, 2, 1, 3).contiguous())
    return [norm, *layers, mean, variance]


def _check_no_transpose(fn, **flags):
    for name, value in flags.items():
        if value:
            raise RuntimeError(f"{fn}: {name}=True is not supported on vNPU (the Ascend kernel's pre-transposed "
                               "operand layouts are not documented); pass untransposed (B, N, S, D) tensors.")


def _attention_score(fn, q, k, v, mask, scale, keep_prob):
    check(q.dim() == 4 and k.shape == q.shape and v.shape == q.shape,
          f"{fn}: query, key and value should be (B, N, S, D) of one shape, got {list(q.shape)}, "
          f"{list(k.shape)}, {list(v.shape)}.")
    check(0 <= keep_prob <= 1, f"{fn}: keep_prob should be in [0, 1], got {keep_prob}.")
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale + mask
    probs = torch.softmax(scores, dim=-1)
    if keep_prob < 1:
        keep = torch.rand(probs.shape, device=probs.device) < keep_prob
        dropped = probs * keep.to(probs.dtype) / keep_prob if keep_prob > 0 else probs * 0
        drop_mask = keep.to(torch.uint8).reshape(-1)
    else:
        dropped = probs
        drop_mask = torch.ones(probs.numel(), dtype=torch.uint8, device=probs.device)
    b, n, s, d = q.shape
    context = torch.matmul(dropped, v).permute(0, 2, 1, 3).reshape(b * s, n * d)
    return context, probs, drop_mask


def npu_fused_attention_score_fwd(query_layer, key_layer, value_layer, attention_mask, scale, keep_prob,
                                  query_transpose=False, key_transpose=False, bmm_score_transpose_a=False,
                                  bmm_score_transpose_b=False, value_transpose=False, dx_transpose=False):
    fn = "npu_fused_attention_score_fwd"
    _check_no_transpose(fn, query_transpose=query_transpose, key_transpose=key_transpose,
                        bmm_score_transpose_a=bmm_score_transpose_a, bmm_score_transpose_b=bmm_score_transpose_b,
                        value_transpose=value_transpose)
    return _attention_score(fn, query_layer, key_layer, value_layer, attention_mask, float(scale), keep_prob)


def npu_fused_attention_score(query_layer, key_layer, value_layer, attention_mask, scale, keep_prob,
                              query_transpose=False, key_transpose=False, bmm_score_transpose_a=False,
                              bmm_score_transpose_b=False, value_transpose=False, dx_transpose=False):
    fn = "npu_fused_attention_score"
    _check_no_transpose(fn, query_transpose=query_transpose, key_transpose=key_transpose,
                        bmm_score_transpose_a=bmm_score_transpose_a, bmm_score_transpose_b=bmm_score_transpose_b,
                        value_transpose=value_transpose)
    return _attention_score(fn, query_layer, key_layer, value_layer, attention_mask, float(scale), keep_prob)[0]


_FLAGS = ("bool query_transpose=False, bool key_transpose=False, bool bmm_score_transpose_a=False, "
          "bool bmm_score_transpose_b=False, bool value_transpose=False, bool dx_transpose=False")
define("npu_fused_attention_layernorm_qkv_fwd(Tensor x, Tensor kernel_query, Tensor kernel_key, "
       "Tensor kernel_value, Tensor gamma, Tensor beta, Tensor? bias_query=None, Tensor? bias_key=None, "
       "Tensor? bias_value=None, int seq_len=128, int num_heads=12, float eps=1e-05) -> Tensor[]",
       npu_fused_attention_layernorm_qkv_fwd)
define("npu_fused_attention_score_fwd(Tensor query_layer, Tensor key_layer, Tensor value_layer, "
       f"Tensor attention_mask, Scalar scale, float keep_prob, {_FLAGS}) -> (Tensor, Tensor, Tensor)",
       npu_fused_attention_score_fwd)
define("npu_fused_attention_score(Tensor query_layer, Tensor key_layer, Tensor value_layer, "
       f"Tensor attention_mask, Scalar scale, float keep_prob, {_FLAGS}) -> Tensor", npu_fused_attention_score)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
