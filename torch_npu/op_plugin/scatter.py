"""Indexed writes into a tensor: npu_scatter_nd_update(_) and npu_quant_scatter(_).

- npu_scatter_nd_update (TensorFlow's ScatterNdUpdate): ``indices`` (..., K)
  address the first K dimensions of ``input``; ``updates`` has shape
  indices.shape[:-1] + input.shape[K:], and
  ``out[tuple(indices[i])] = updates[i]``. Repeated indices write one of their
  updates (which one is unspecified, as on Ascend).
- npu_quant_scatter: quantises ``updates`` to int8 along its last dimension,
  ``round(updates / quant_scales + quant_zero_points)`` (round half to even,
  saturated to [-128, 127]), then writes it as scatter_update does: with 1-D
  ``indices`` batch b of the input receives updates[b] at positions
  indices[b] ... indices[b] + L - 1 along ``axis`` (L = updates.shape[axis]);
  with 2-D ``indices`` (M, 2) each row is (batch, start position). The Ascend
  docs say only that the scales "scale" the updates; the division follows
  torch_npu's npu_quantize convention and is documented in docs/fused_ops.md.

The out-of-place forms clone the input; the ``_`` forms write in place and
return it. Under functionalization (torch.func.functionalize, torch.compile)
each ``_`` form becomes its out-of-place form, one node, then a write-back
(Note [Functionalized in-place operators] in _library.py).
"""

import torch

from torch_npu import _dtypes
from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define_mutating


def _nd_index(fn, x, indices, updates):
    check(not indices.is_floating_point() and not indices.is_complex(),
          f"{fn}: indices should be an integer tensor, got {indices.dtype}.")
    check(indices.dim() >= 1, f"{fn}: indices should have at least one dimension.")
    depth = indices.shape[-1]
    check(1 <= depth <= x.dim(), f"{fn}: the last dimension of indices ({depth}) should be in [1, {x.dim()}] "
          "(the input's rank).")
    want = list(indices.shape[:-1]) + list(x.shape[depth:])
    check(list(updates.shape) == want, f"{fn}: updates should have shape indices.shape[:-1] + "
          f"input.shape[{depth}:] = {want}, got {list(updates.shape)}.")
    flat = indices.reshape(-1, depth).long()
    return tuple(flat[:, d] for d in range(depth)), updates.reshape(flat.shape[0], *x.shape[depth:]).to(x.dtype)


def npu_scatter_nd_update(x, indices, updates):
    index, values = _nd_index("npu_scatter_nd_update", x, indices, updates)
    return x.index_put(index, values)


def npu_scatter_nd_update_(x, indices, updates):
    index, values = _nd_index("npu_scatter_nd_update_", x, indices, updates)
    return x.index_put_(index, values)


def _quant_scatter(fn, x, indices, updates, quant_scales, quant_zero_points, axis, quant_axis, reduce, dst_type,
                   round_mode):
    check(reduce == "update", f"{fn}: reduce only supports 'update', got '{reduce}'.")
    # dst_type and round_mode reach only the Ascend 950 kernel (aclnnInplaceQuantScatterV2), which reads self's
    # bytes as dst_type; vNPU quantises to int8 as the A2 / inference kernels do.
    check(_dtypes.name_of(dst_type) in (None, "int8"), f"{fn}: dst_type={_dtypes.name_of(dst_type)} is not "
          "supported on vNPU: only int8 results (dst_type None or torch.int8) are emulated.")
    check(round_mode in (None, "rint", "round"), f"{fn}: round_mode should be 'rint' (half to even) or 'round' "
          f"(half away from zero), got '{round_mode}'.")
    check(x.dtype == torch.int8, f"{fn}: self should be int8, got {x.dtype}.")
    check(3 <= x.dim() <= 8, f"{fn}: self should have 3 to 8 dimensions, got {x.dim()}.")
    check(updates.dim() == x.dim(), f"{fn}: updates should have as many dimensions as self ({x.dim()}), "
          f"got {updates.dim()}.")
    rank = x.dim()
    axis, quant_axis = axis % rank, quant_axis % rank
    check(axis not in (0, rank - 1), f"{fn}: axis cannot be the first or the last dimension of updates.")
    check(quant_axis == rank - 1, f"{fn}: quant_axis should be the last dimension of updates.")
    m = updates.shape[0]
    check(indices.dim() in (1, 2) and indices.shape[0] == m and (indices.dim() == 1 or indices.shape[1] == 2),
          f"{fn}: indices should be ({m},) or ({m}, 2), got {list(indices.shape)}.")
    check(m <= x.shape[0] and updates.shape[axis] <= x.shape[axis] and all(
        updates.shape[d] == x.shape[d] for d in range(1, rank) if d != axis),
          f"{fn}: updates of shape {list(updates.shape)} do not fit self of shape {list(x.shape)} along axis {axis}.")
    channels = updates.shape[-1]
    check(quant_scales.numel() == channels, f"{fn}: quant_scales should have {channels} elements (updates' "
          f"quant_axis size), got {quant_scales.numel()}.")
    y = updates.float() / quant_scales.float().reshape(channels)
    if quant_zero_points is not None:
        check(quant_zero_points.numel() == channels, f"{fn}: quant_zero_points should have {channels} elements, "
              f"got {quant_zero_points.numel()}.")
        y = y + quant_zero_points.float().reshape(channels)
    rounded = torch.round(y) if round_mode in (None, "rint") else torch.sign(y) * torch.floor(y.abs() + 0.5)
    q = rounded.clamp_(-128, 127).to(torch.int8)
    indices = indices.long()
    batch = torch.arange(m, device=x.device) if indices.dim() == 1 else indices[:, 0]
    start = indices if indices.dim() == 1 else indices[:, 1]
    index = []
    for d in range(rank):
        shape = [1] * rank
        shape[d] = updates.shape[d]
        if d == 0:
            index.append(batch.view(shape))
        elif d == axis:
            index.append((start.view([m] + [1] * (rank - 1)) + torch.arange(updates.shape[d], device=x.device)
                          .view(shape)))
        else:
            index.append(torch.arange(updates.shape[d], device=x.device).view(shape))
    return tuple(index), q


def npu_quant_scatter(x, indices, updates, quant_scales, quant_zero_points=None, axis=-2, quant_axis=-1,
                      reduce="update", dst_type=None, round_mode="rint"):
    index, q = _quant_scatter("npu_quant_scatter", x, indices, updates, quant_scales, quant_zero_points, axis,
                              quant_axis, reduce, dst_type, round_mode)
    return x.index_put(index, q)


def npu_quant_scatter_(x, indices, updates, quant_scales, quant_zero_points=None, axis=-2, quant_axis=-1,
                       reduce="update", dst_type=None, round_mode="rint"):
    index, q = _quant_scatter("npu_quant_scatter_", x, indices, updates, quant_scales, quant_zero_points, axis,
                              quant_axis, reduce, dst_type, round_mode)
    return x.index_put_(index, q)


define_mutating("npu_scatter_nd_update(Tensor self, Tensor indices, Tensor updates) -> Tensor", npu_scatter_nd_update,
                "npu_scatter_nd_update_(Tensor(a!) self, Tensor indices, Tensor updates) -> Tensor(a!)",
                npu_scatter_nd_update_)
_QUANT_ARGS = ("Tensor indices, Tensor updates, Tensor quant_scales, Tensor? quant_zero_points=None, int axis=-2, "
               "int quant_axis=-1, str reduce='update', int? dst_type=None, str? round_mode='rint'")
define_mutating(f"npu_quant_scatter(Tensor self, {_QUANT_ARGS}) -> Tensor", npu_quant_scatter,
                f"npu_quant_scatter_(Tensor(a!) self, {_QUANT_ARGS}) -> Tensor(a!)", npu_quant_scatter_)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
