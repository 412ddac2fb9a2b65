"""torch_npu.matmul_checksum(a, b, c): is ``c`` really ``a @ b``?

Algorithm-based fault tolerance for one matmul. Multiplying both sides of
``c = a @ b`` by a vector of ones gives ``c.sum(-1) == a @ b.sum(-1)``: a
matrix-vector product, far cheaper than the matmul, that a bit flipped by
faulty hardware in ``c`` breaks by much more than rounding can.

Note [Checksum rounding bound]
Every element of ``c`` is off by up to ``u * |c|`` with ``u = 2**-8``
(bfloat16's unit roundoff, the coarsest dtype a matmul here takes), so a row
sum of ``n`` elements drifts by about
- ``u * sqrt(n) * max|c|`` when the errors are independent and a few large
  elements dominate (a random walk), or
- ``u * n * mean|c|`` when the row is flat and the errors can add up.
The first is used when every row is peaked (max/mean above 5), the second
otherwise; a difference beyond five bounds is a fault.

On a suspected fault the matmul is run again into ``c``, which repairs it,
and the answer is whether that changed ``c``: a transient fault does, a false
alarm does not.
"""

import torch

__all__ = []

_UNIT_ROUNDOFF = 2.0 ** -8
_PEAKED = 5.0       # max|c| / mean|c| above which a row's rounding is a random walk
_TOLERANCE = 5.0    # bounds a checksum difference may reach before it is a fault
_NEGLIGIBLE = 1e-20  # an all-zero row has a zero bound: differences below this are no fault


def _require_npu_tensor(name, value):
    if isinstance(value, torch.Tensor) and value.device.type == "npu":
        return
    found = value.device if isinstance(value, torch.Tensor) else type(value).__name__
    raise TypeError(f"matmul_checksum: {name} should be a torch.Tensor on an npu device, got {found}. "
                    "Pass the matmul's inputs and output as npu tensors.")


def _rounding_bound(c):
    """How far each row sum of ``c`` may drift by rounding alone (Note [Checksum rounding bound])."""
    size = c.abs().float()
    largest, average = size.amax(dim=-1), size.mean(dim=-1)
    row_length = c.shape[-1]
    if bool((largest / average).min() > _PEAKED):
        return largest * (_UNIT_ROUNDOFF * row_length ** 0.5)
    return average * (_UNIT_ROUNDOFF * row_length)


def _checksum_broken(a, b, c):
    ones_b = b.sum(dim=-1, keepdim=True, dtype=torch.float32)  # b @ ones
    predicted = (a.float() @ ones_b).squeeze(-1)
    observed = c.sum(dim=-1, dtype=torch.float32)
    excess = (observed - predicted).abs() - _TOLERANCE * _rounding_bound(c)
    return (excess > _NEGLIGIBLE).any()


def _matmul_checksum(a, b, c):
    """Returns a bool tensor on ``c``'s device: True if ``c`` was not ``a @ b``
    (and has been recomputed in place), False if it checked out."""
    for name, operand in zip("abc", (a, b, c)):
        _require_npu_tensor(name, operand)
    broken = _checksum_broken(a, b, c)
    if not bool(broken):
        return broken
    suspect = c.clone()
    torch.matmul(a, b, out=c)
    return (c != suspect).any()
