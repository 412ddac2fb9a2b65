"""torch_npu.matmul_checksum(a, b, c): is ``c`` really ``a @ b``?

Algorithm-based fault tolerance for one matmul: summing ``c`` over its last
dimension must give ``a @ b.sum(-1)`` (a matrix-vector product, much cheaper
than the matmul). The two sides differ by rounding only; a bit flipped by
faulty hardware makes them differ by more than rounding can explain. On a
suspected fault the matmul is recomputed into ``c`` (repairing it), and the
answer is whether the recomputation changed ``c``: a transient fault changes
it, a false alarm does not.

The rounding bound: each element of ``c`` carries a relative error of about
2**-8 (bfloat16's unit roundoff, the coarsest dtype a matmul here takes), and
a row sum of ``n`` such elements has an error of about ``2**-8 * sqrt(n) *
max|c|`` when errors are independent (a random walk), or up to ``2**-8 * n *
mean|c|`` when the row is flat and they add up. The bound used is the first
for rows dominated by a few large elements (max/mean > 5), the second
otherwise, and a fault is flagged when the difference exceeds five times it.
"""

import math

import torch

__all__ = []

_UNIT_ROUNDOFF = 2.0 ** -8
_PEAKED_ROW = 5.0  # max|c| / mean|c| above which a row's rounding behaves as a random walk
_MARGIN = 5.0  # how many rounding bounds a difference must exceed to count as a fault
_FLOOR = 1e-20  # differences below this are zero, whatever the bound (all-zero rows)


def _check_operand(name, t):
    if not isinstance(t, torch.Tensor) or t.device.type != "npu":
        where = t.device if isinstance(t, torch.Tensor) else type(t).__name__
        raise TypeError(f"matmul_checksum: {name} should be a torch.Tensor on an npu device, got {where}. "
                        "Pass the matmul's inputs and output as npu tensors.")


def _matmul_checksum(a, b, c):
    """Returns a bool tensor on ``c``'s device: True if ``c`` was not ``a @ b``
    (the matmul was recomputed into ``c``), False if it checked out."""
    for name, t in (("a", a), ("b", b), ("c", c)):
        _check_operand(name, t)
    n = b.shape[-1]
    row_sums = c.sum(dim=-1, dtype=torch.float32)
    expected = torch.matmul(a.float(), b.sum(dim=-1, keepdim=True, dtype=torch.float32)).squeeze(-1)
    magnitude = c.abs().float()
    row_max = magnitude.amax(dim=-1)
    row_mean = magnitude.mean(dim=-1)
    peaked = bool((row_max / row_mean).min() > _PEAKED_ROW)
    bound = row_max * (_UNIT_ROUNDOFF * math.sqrt(n)) if peaked else row_mean * (_UNIT_ROUNDOFF * n)
    suspect = ((row_sums - expected).abs() - _MARGIN * bound > _FLOOR).any()
    if not bool(suspect):
        return suspect
    before = c.clone()
    torch.matmul(a, b, out=c)
    return (c != before).any()
