"""BERT self-attention from a flat hidden state: QKV projections, scores, context.

Real torch_npu fuses this into npu_fused_attention_* Ascend kernels that
accept only the BERT-base/large shapes (hidden 768 or 1024, heads of 64, a
batch*seq multiple of 32); the same shape checks are made here, then the
computation is the textbook formula in ATen operators (autograd supplies
the backward real torch_npu writes by hand):

    x                      (B*S, H) hidden states, optionally layer-normed first
    q, k, v = x @ W + b    each reshaped (B, S, N, 64) -> (B, N, S, 64)
    p = softmax(q k^T * scale + mask)                 mask (B, 1, S, S), additive
    context = dropout(p) v -> (B, S, N, 64) -> (B*S, H)

Dropout: ``keep_prob`` is the probability of keeping an element; the
default 0 (and 1) run without dropout, as the fused kernel's default does
not zero the output.
"""

import torch
import torch.nn.functional as F

__all__ = ["npu_fused_attention", "npu_fused_attention_with_layernorm"]

_HEAD_DIM = 64
_HIDDEN_SIZES = (768, 1024)
_LAYERNORM_EPS = 1e-5


def _check_shapes(hidden_states, attention_mask, kernels):
    prefix = "fused attention check compatibility failed"
    if hidden_states.dim() != 2 or hidden_states.shape[0] % 32 != 0 \
            or hidden_states.shape[1] not in _HIDDEN_SIZES:
        raise RuntimeError(f"{prefix}, shape of hidden_states not matches: expected (B*S, 768 or 1024) "
                           f"with B*S a multiple of 32, got {tuple(hidden_states.shape)}")
    if attention_mask.dim() != 4 or attention_mask.shape[1] != 1 \
            or attention_mask.shape[2] != attention_mask.shape[3] \
            or attention_mask.shape[0] * attention_mask.shape[2] != hidden_states.shape[0]:
        raise RuntimeError(f"{prefix}, shape of attention_mask not matches: expected (B, 1, S, S) with "
                           f"B*S == hidden_states.shape[0], got {tuple(attention_mask.shape)}")
    if any(k.dim() != 2 or k.shape[0] not in _HIDDEN_SIZES or k.shape[0] != hidden_states.shape[1]
           for k in kernels):
        raise RuntimeError(f"{prefix}, shape of kernel not matches: expected (H, H), H = hidden size")


# The storage formats the device's fused kernels take: hidden states, mask
# and the three kernels FRACTAL_NZ (29), the three biases ND (2).
_VALID_FORMATS = [29, 29, 29, 29, 29, 2, 2, 2]


def _is_format_matched(tensors):
    """Whether (hidden_states, attention_mask, q/k/v kernels, q/k/v biases) have
    the storage formats the device's fused attention kernels take."""
    import torch_npu
    return [int(torch_npu.get_npu_format(t)) for t in tensors] == _VALID_FORMATS


def _check_compatibility_once(hidden_states, attention_mask, query_kernel, key_kernel, value_kernel,
                              query_bias, key_bias, value_bias, gamma=None, beta=None):
    """The device's requirements for its fused attention kernels: the formats
    above (gamma and beta ND too), then the shapes. Real torch_npu runs this
    check on the first call only; here it checks every call it is given.
    vNPU's npu_fused_attention itself computes any format and checks only
    the shapes."""
    import torch_npu
    from torch_npu.utils._error_code import ErrCode, ops_error
    prefix = "fused attention check compatibility failed"
    if not _is_format_matched([hidden_states, attention_mask, query_kernel, key_kernel, value_kernel,
                               query_bias, key_bias, value_bias]):
        raise RuntimeError(f"{prefix}, format not matches" + ops_error(ErrCode.VALUE))
    if gamma is not None and beta is not None and \
            (int(torch_npu.get_npu_format(gamma)) != 2 or int(torch_npu.get_npu_format(beta)) != 2):
        raise RuntimeError(f"{prefix}, gamma or beta format not matches" + ops_error(ErrCode.VALUE))
    _check_shapes(hidden_states, attention_mask, (query_kernel, key_kernel, value_kernel))


def _attention(x, attention_mask, kernels, biases, scale, keep_prob):
    batch, seq = attention_mask.shape[0], attention_mask.shape[2]
    hidden = x.shape[1]
    heads = hidden // _HEAD_DIM

    def heads_first(t):
        return t.reshape(batch, seq, heads, _HEAD_DIM).permute(0, 2, 1, 3)

    q, k, v = (heads_first(torch.addmm(b, x, w)) for w, b in zip(kernels, biases))
    probs = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * scale + attention_mask, dim=-1)
    if 0. < keep_prob < 1.:
        probs = F.dropout(probs, p=1. - keep_prob, training=True)
    context = torch.matmul(probs, v)
    return context.permute(0, 2, 1, 3).reshape(batch * seq, hidden)


def npu_fused_attention(hidden_states, attention_mask, query_kernel, key_kernel, value_kernel,
                        query_bias, key_bias, value_bias, scale=1, keep_prob=0):
    """Self-attention context (B*S, H) of ``hidden_states`` (B*S, H); see the module docstring."""
    kernels = (query_kernel, key_kernel, value_kernel)
    _check_shapes(hidden_states, attention_mask, kernels)
    return _attention(hidden_states, attention_mask, kernels, (query_bias, key_bias, value_bias),
                      scale, keep_prob)


def npu_fused_attention_with_layernorm(hidden_states, attention_mask, query_kernel, key_kernel,
                                       value_kernel, query_bias, key_bias, value_bias, gamma, beta,
                                       scale=1, keep_prob=0):
    """(context, norm): self-attention over norm = layer_norm(hidden_states, gamma, beta)."""
    kernels = (query_kernel, key_kernel, value_kernel)
    _check_shapes(hidden_states, attention_mask, kernels)
    norm = F.layer_norm(hidden_states, (hidden_states.shape[1],), gamma, beta, _LAYERNORM_EPS)
    context = _attention(norm, attention_mask, kernels, (query_bias, key_bias, value_bias), scale, keep_prob)
    return context, norm
