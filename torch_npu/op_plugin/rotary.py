"""Rotary position embedding: npu_rotary_mul (+ backward), the in-place
npu_apply_rotary_pos_emb, and npu_interleave_rope (its own docstring).

``out = x * r1 + rotate(x) * r2``, where rotate is 'half' (the two halves of
the last dimension: ``cat(-x2, x1)``) or 'interleave' (each even/odd pair:
``(-x[1], x[0])``).
"""

import torch

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define

_MODES = ("half", "interleave")


def _rotate(x, mode):
    if mode == "half":
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    pairs = x.unflatten(-1, (-1, 2))
    return torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)


def _check(fn, x, r1, r2, mode):
    check(mode in _MODES, f"{fn}: rotary_mode should be 'half' or 'interleave', but got '{mode}'.")
    check(x.shape[-1] % 2 == 0, f"{fn}: the last dimension of x ({x.shape[-1]}) should be even.")
    for name, r in (("r1", r1), ("r2", r2)):
        try:
            ok = torch.broadcast_shapes(r.shape, x.shape) == x.shape
        except RuntimeError:
            ok = False
        check(ok, f"{fn}: {name} of shape {list(r.shape)} does not broadcast to x of shape {list(x.shape)}.")


def npu_rotary_mul(x, r1, r2, rotary_mode="half"):
    _check("npu_rotary_mul", x, r1, r2, rotary_mode)
    return x * r1 + _rotate(x, rotary_mode) * r2


def _reduce_to(t, shape):
    """Sums a broadcast gradient back to `shape`."""
    lead = t.dim() - len(shape)
    t = t.sum(tuple(range(lead))) if lead else t
    dims = tuple(i for i, s in enumerate(shape) if s == 1 and t.shape[i] != 1)
    return t.sum(dims, keepdim=True) if dims else t


def npu_rotary_mul_backward(grad, x, r1, r2, rotary_mode="half"):
    """(dx, dr1, dr2) of npu_rotary_mul."""
    _check("npu_rotary_mul_backward", x, r1, r2, rotary_mode)
    # rotate is linear and its transpose is -rotate.
    dx = grad * r1 - _rotate(grad * r2, rotary_mode)
    return dx, _reduce_to(grad * x, r1.shape), _reduce_to(grad * _rotate(x, rotary_mode), r2.shape)


def npu_apply_rotary_pos_emb(query, key, cos, sin, layout="BSND", rotary_mode="half"):
    """Applies the rotation to query and key in place; returns them."""
    check(layout in ("BSND", "BSH", "SBND", "BNSD"),
          f"npu_apply_rotary_pos_emb: layout should be one of ['BSND', 'BSH', 'SBND', 'BNSD'], but got '{layout}'.")
    q = npu_rotary_mul(query, cos, sin, rotary_mode)
    k = npu_rotary_mul(key, cos, sin, rotary_mode)
    query.copy_(q)
    key.copy_(k)
    return query, key


def npu_interleave_rope(x, cos, sin):
    """RoPE of interleaved pairs (DeepSeek MLA's rope part): x's last
    dimension (x0, x1, x2, x3, ...) is first de-interleaved to
    (x0, x2, ..., x1, x3, ...), then q * cos + rotate_half(q) * sin, in float32,
    in x's dtype. As on Ascend: x (B, N, S, 64), cos / sin (B, 1, S or 1, 64)."""
    fn = "npu_interleave_rope"
    check(x.dim() == 4 and cos.dim() == 4 and sin.dim() == 4,
          f"{fn}: x, cos and sin should be 4-D (B, N, S, D), got {x.dim()}-D, {cos.dim()}-D and {sin.dim()}-D.")
    check(x.dtype in (torch.float16, torch.bfloat16) and cos.dtype == x.dtype and sin.dtype == x.dtype,
          f"{fn}: x should be float16 or bfloat16 and cos / sin of the same dtype, got {x.dtype}, {cos.dtype} "
          f"and {sin.dtype}.")
    check(x.shape[-1] == 64 and cos.shape[-1] == 64 and sin.shape[-1] == 64,
          f"{fn}: the last dimension (D) of x, cos and sin should be 64, got {x.shape[-1]}, {cos.shape[-1]} and "
          f"{sin.shape[-1]}.")
    check(cos.shape == sin.shape and cos.shape[0] == x.shape[0] and cos.shape[1] == 1
          and cos.shape[2] in (1, x.shape[2]),
          f"{fn}: cos and sin should have shape [{x.shape[0]}, 1, 1 or {x.shape[2]}, 64], got {list(cos.shape)} and "
          f"{list(sin.shape)}.")
    b, n, s, d = x.shape
    q = x.float().reshape(b, n, s, d // 2, 2).transpose(-1, -2).reshape(b, n, s, d)
    rotated = torch.cat((-q[..., d // 2:], q[..., :d // 2]), dim=-1)
    return (q * cos.float() + rotated * sin.float()).to(x.dtype)


define("npu_interleave_rope(Tensor x, Tensor cos, Tensor sin) -> Tensor", npu_interleave_rope)
define("npu_rotary_mul(Tensor self, Tensor r1, Tensor r2, str rotary_mode=\"half\") -> Tensor", npu_rotary_mul)
define("npu_rotary_mul_backward(Tensor grad, Tensor self, Tensor r1, Tensor r2, str rotary_mode=\"half\") "
       "-> (Tensor, Tensor, Tensor)", npu_rotary_mul_backward)
define("npu_apply_rotary_pos_emb(Tensor(a!) query, Tensor(b!) key, Tensor cos, Tensor sin, str layout=\"BSND\", "
       "str rotary_mode=\"half\") -> (Tensor(a!), Tensor(b!))", npu_apply_rotary_pos_emb)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
