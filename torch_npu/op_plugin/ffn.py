"""``npu_ffn``: a transformer's feed-forward block in one operator, and
``npu_prefetch``, the L2-cache prefetch hint inference code issues before it.

npu_ffn computes ``activation(x @ W1 + b1) @ W2 + b2``; with ``expert_tokens``
(tokens per expert) or ``expert_tokens_index`` (each expert's end row) the rows
of x are split among experts and each slice uses its expert's weights (MoeFFN).
Three numeric modes, chosen by the dtypes as on the device:

- float (x and weights float16/bfloat16): the formula above, accumulated in
  float32. The activation's output, which the kernel keeps in x's dtype between
  its two matmuls, is rounded to it, except for float16 with
  ``inner_precise=0`` (the high-precision mode keeps float32);
- weight-only quantisation (int8 weights, float x): each weight is first
  dequantised, ``(W + antiquant_offset) * antiquant_scale`` per output channel;
- int8 quantisation (int8 x and weights, int32 biases): each matmul
  accumulates in int32 and is dequantised by ``deq_scale1`` / ``deq_scale2``
  (int64 scales carry float32 bits, as npu_trans_quant_param makes them); the
  activation is requantised to int8 with ``scale`` and ``offset`` between the two.

The gated activations (geglu, swiglu, reglu) take W1's two output halves, the
first activated: N1 = 2 * K2.
"""

import torch
import torch.nn.functional as F

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define
from torch_npu.op_plugin.activation import npu_fast_gelu
from torch_npu.op_plugin.quant import _saturate_int8, _scale_value
from torch_npu.op_plugin.quant_matmul import _mm64

_PLAIN = {"fastgelu": npu_fast_gelu, "gelu": F.gelu, "relu": F.relu, "silu": F.silu}
_GATED = {"geglu": F.gelu, "swiglu": F.silu, "reglu": F.relu}
_MAX_EXPERTS = 256
_QUANT_NAMES = ("scale", "offset", "deq_scale1", "deq_scale2")
_ANTIQUANT_NAMES = ("antiquant_scale1", "antiquant_scale2", "antiquant_offset1", "antiquant_offset2")


def _expert_rows(fn, m, expert_tokens, expert_tokens_index):
    """Rows per expert, from counts or from cumulative end indices."""
    check(expert_tokens is None or expert_tokens_index is None,
          f"{fn}: pass expert_tokens or expert_tokens_index, not both.")
    if expert_tokens is None and expert_tokens_index is None:
        return None
    if expert_tokens is not None:
        counts = list(expert_tokens)
        check(all(c >= 0 for c in counts), f"{fn}: expert_tokens should be nonnegative, got {counts}.")
    else:
        ends = list(expert_tokens_index)
        check(all(b >= a for a, b in zip([0] + ends, ends)),
              f"{fn}: expert_tokens_index should be nondecreasing end indices, got {ends}.")
        counts = [b - a for a, b in zip([0] + ends, ends)]
    check(0 < len(counts) <= _MAX_EXPERTS, f"{fn}: between 1 and {_MAX_EXPERTS} experts are supported, "
                                           f"got {len(counts)}.")
    check(sum(counts) == m, f"{fn}: the experts' tokens ({sum(counts)}) should add up to the rows of x ({m}).")
    return counts


def _per_expert(fn, name, t, experts, n):
    """``t`` as (experts, n) rows (or None): per-tensor values broadcast along n."""
    if t is None:
        return None
    e = experts or 1
    if t.numel() == e * n:
        return t.reshape(e, n)
    check(t.numel() == e, f"{fn}: {name} should have {e * n} or {e} elements, got shape {list(t.shape)}.")
    return t.reshape(e, 1).expand(e, n)


def _mode(fn, x, weight1, weight2, params):
    given = {name for name, t in params.items() if t is not None}
    if x.dtype == torch.int8:
        check(weight1.dtype == torch.int8 and weight2.dtype == torch.int8,
              f"{fn}: with int8 x the weights should be int8, got {weight1.dtype} and {weight2.dtype}.")
        check(not given & set(_ANTIQUANT_NAMES), f"{fn}: the quantised mode (int8 x) takes no antiquant "
                                                 f"parameters, got {sorted(given & set(_ANTIQUANT_NAMES))}.")
        missing = [n for n in ("scale", "deq_scale1", "deq_scale2") if n not in given]
        check(not missing, f"{fn}: the quantised mode (int8 x) needs {missing}.")
        return "quant"
    check(x.dtype in (torch.float16, torch.bfloat16),
          f"{fn}: x should be float16, bfloat16 or int8, got {x.dtype}.")
    check(not given & set(_QUANT_NAMES), f"{fn}: quantisation parameters {sorted(given & set(_QUANT_NAMES))} "
                                         f"need int8 x, got {x.dtype}.")
    if weight1.dtype == torch.int8:
        check(weight2.dtype == torch.int8, f"{fn}: weight2 should be int8 like weight1, got {weight2.dtype}.")
        check("antiquant_scale1" in given and "antiquant_scale2" in given,
              f"{fn}: int8 weights with {x.dtype} x need antiquant_scale1 and antiquant_scale2.")
        return "antiquant"
    check(weight1.dtype == x.dtype and weight2.dtype == x.dtype,
          f"{fn}: weight1 and weight2 should have x's dtype {x.dtype}, got {weight1.dtype} and {weight2.dtype}.")
    check(not given & set(_ANTIQUANT_NAMES), f"{fn}: antiquant parameters need int8 weights, got "
                                             f"{weight1.dtype}.")
    return "float"


def _out_dtype(fn, mode, x, output_dtype):
    if mode != "quant":
        return x.dtype
    check(output_dtype in (None, torch.float16, torch.bfloat16),
          f"{fn}: output_dtype should be torch.float16 or torch.bfloat16, got {output_dtype}.")
    return output_dtype or torch.float16


def npu_ffn(x, weight1, weight2, activation, *, expert_tokens=None, expert_tokens_index=None, bias1=None,
            bias2=None, scale=None, offset=None, deq_scale1=None, deq_scale2=None, antiquant_scale1=None,
            antiquant_scale2=None, antiquant_offset1=None, antiquant_offset2=None, inner_precise=None,
            output_dtype=None):
    fn = "npu_ffn"
    check(activation in _PLAIN or activation in _GATED,
          f"{fn}: activation should be one of {sorted(_PLAIN) + sorted(_GATED)}, got '{activation}'.")
    check(2 <= x.dim() <= 8, f"{fn}: x should have 2 to 8 dimensions, got {x.dim()}.")
    params = dict(scale=scale, offset=offset, deq_scale1=deq_scale1, deq_scale2=deq_scale2,
                  antiquant_scale1=antiquant_scale1, antiquant_scale2=antiquant_scale2,
                  antiquant_offset1=antiquant_offset1, antiquant_offset2=antiquant_offset2)
    mode = _mode(fn, x, weight1, weight2, params)
    out_dtype = _out_dtype(fn, mode, x, output_dtype)
    rows = x.reshape(-1, x.shape[-1])
    counts = _expert_rows(fn, rows.shape[0], expert_tokens, expert_tokens_index)
    experts = len(counts) if counts is not None else 0
    weight_dim = 3 if experts else 2
    check(weight1.dim() == weight_dim and weight2.dim() == weight_dim,
          f"{fn}: weights should be {weight_dim}-dimensional ({'E, ' if experts else ''}K, N) "
          f"{'with' if experts else 'without'} experts, got {list(weight1.shape)} and {list(weight2.shape)}.")
    w1 = weight1 if experts else weight1.unsqueeze(0)
    w2 = weight2 if experts else weight2.unsqueeze(0)
    e = max(experts, 1)
    check(w1.shape[0] == e and w2.shape[0] == e,
          f"{fn}: weight1 and weight2 should hold {e} experts, got {w1.shape[0]} and {w2.shape[0]}.")
    k1, n1 = w1.shape[1:]
    k2, n2 = w2.shape[1:]
    gated = activation in _GATED
    check(rows.shape[1] == k1, f"{fn}: the last dimension of x ({rows.shape[1]}) should equal K1 of weight1 ({k1}).")
    check(k1 == n2, f"{fn}: K1 ({k1}) should equal N2 ({n2}).")
    check(n1 == (2 * k2 if gated else k2),
          f"{fn}: with activation '{activation}' N1 ({n1}) should be {'2 * ' if gated else ''}K2 ({k2}).")
    check(not gated or (not experts and mode == "float" and x.dtype == torch.float16),
          f"{fn}: activation '{activation}' is supported for float16 without experts only.")
    check(inner_precise in (None, 0, 1), f"{fn}: inner_precise should be 0 or 1, got {inner_precise}.")

    b1 = _per_expert(fn, "bias1", bias1, experts, n1)
    b2 = _per_expert(fn, "bias2", bias2, experts, n2)
    if mode == "antiquant":
        w1 = _dequantised(fn, w1, antiquant_scale1, antiquant_offset1, experts, 1, x.dtype)
        w2 = _dequantised(fn, w2, antiquant_scale2, antiquant_offset2, experts, 2, x.dtype)
    quant = None
    if mode == "quant":
        quant = [_per_expert(fn, name, t, experts, n) for name, t, n in
                 (("deq_scale1", deq_scale1, n1), ("scale", scale, k2), ("offset", offset, k2),
                  ("deq_scale2", deq_scale2, n2))]
    keep_float32 = mode == "float" and x.dtype == torch.float16 and inner_precise == 0

    pieces = []
    start = 0
    for i, count in enumerate(counts if counts is not None else [rows.shape[0]]):
        part = rows[start:start + count]
        start += count
        expert = [t[i] if t is not None else None for t in (b1, b2)]
        if mode == "quant":
            pieces.append(_quantised_ffn(part, w1[i], w2[i], expert, [q[i] if q is not None else None for q in quant],
                                         activation))
        else:
            pieces.append(_float_ffn(part, w1[i], w2[i], expert, activation, x.dtype, keep_float32))
    y = torch.cat(pieces) if len(pieces) > 1 else pieces[0]
    return y.to(out_dtype).reshape(*x.shape[:-1], n2)


def _dequantised(fn, w, scale, offset, experts, which, dtype):
    n = w.shape[-1]
    s = _per_expert(fn, f"antiquant_scale{which}", scale, experts, n)
    o = _per_expert(fn, f"antiquant_offset{which}", offset, experts, n)
    w = w.to(dtype)
    if o is not None:
        w = w + o.to(dtype).unsqueeze(1)
    return w * s.to(dtype).unsqueeze(1)


def _activate(h, activation):
    if activation in _GATED:
        a, b = h.chunk(2, dim=-1)
        return _GATED[activation](a) * b
    return _PLAIN[activation](h)


def _float_ffn(x, w1, w2, biases, activation, dtype, keep_float32):
    b1, b2 = biases
    h = x.float() @ w1.float()
    if b1 is not None:
        h = h + b1.float()
    h = _activate(h, activation)
    if not keep_float32:
        h = h.to(dtype).float()
    y = h @ w2.float()
    return y + b2.float() if b2 is not None else y


def _int8_matmul(a, w, bias, deq_scale):
    # Products of int8 values summed in float64 are exact for K < 2**37 / 127**2,
    # as the device's int32 accumulator is; the dequantisation is in float32.
    acc = _mm64(a, w)
    if bias is not None:
        acc = acc + bias.double()
    return acc.float() * _scale_value(deq_scale)


def _quantised_ffn(x, w1, w2, biases, quant, activation):
    b1, b2 = biases
    deq1, scale, offset, deq2 = quant
    h = _activate(_int8_matmul(x, w1, b1, deq1), activation) * scale.float()
    if offset is not None:
        h = h + offset.float()
    return _int8_matmul(_saturate_int8(h), w2, b2, deq2)


def npu_prefetch(self, dependency, max_size, offset=0):
    """Asks the device to pull ``max_size`` bytes of ``self`` (from byte
    ``offset``) into its L2 cache, after ``dependency``'s producer. A hint that
    changes no value: vNPU checks the arguments as the kernel does and has no
    cache to fill."""
    check(max_size > 0, f"The max_size should be greater than zero, but got {max_size}.")
    check(offset >= 0, f"The offset should be nonnegative, but got {offset}.")
    size = self.numel() * self.element_size()
    check(size > offset, f"offset out of range of tensor size, tensor size: {size}, offset: {offset}")


define("npu_ffn(Tensor x, Tensor weight1, Tensor weight2, str activation, *, int[]? expert_tokens=None, "
       "int[]? expert_tokens_index=None, Tensor? bias1=None, Tensor? bias2=None, Tensor? scale=None, "
       "Tensor? offset=None, Tensor? deq_scale1=None, Tensor? deq_scale2=None, Tensor? antiquant_scale1=None, "
       "Tensor? antiquant_scale2=None, Tensor? antiquant_offset1=None, Tensor? antiquant_offset2=None, "
       "int? inner_precise=None, ScalarType? output_dtype=None) -> Tensor", npu_ffn, differentiable=False)
define("npu_prefetch(Tensor self, Tensor? dependency, int max_size, int offset=0) -> ()", npu_prefetch,
       differentiable=False)
# Nothing uses npu_prefetch's (empty) result; op_plugin/__init__.py keeps
# graphs from dropping it, with ffn.py imported or not.

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
