"""Layout and indexing operators: npu_slice, npu_indexing,
npu_broadcast, npu_transpose, npu_reshape, npu_stride_add, npu_stride_copy,
npu_sort_v2, npu_one_hot, npu_scatter, scatter_update(_), one_, npu_pad,
npu_sign_bits_pack/unpack, npu_max/npu_min (.dim, .names_dim),
npu_random_choice_with_mask, empty_with_swapped_memory, empty_with_format,
unsafe_empty_with_format, npu_anti_quant.

On Ascend most of these exist because the TBE kernels wanted a fixed layout
(5HD, fractal) or a static shape; here each is its ATen equivalent. An
operator whose schema has no alias annotation returns a fresh tensor, never a
view of its input (``_fresh``), so autograd and functionalization see what
the schema promises.
"""

import torch
import torch.nn.functional as F

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define, define_mutating


def _fresh(t, source):
    """t, copied if it shares storage with ``source`` (a view or source itself)."""
    # _is_alias_of compares storages, which fake and functional tensors
    # (torch.compile, torch.export) have too; their data pointers they have not.
    if torch._C._is_alias_of(t, source):
        return t.clone(memory_format=torch.contiguous_format)
    return t.contiguous()


def _check_rank(fn, x, name, values):
    check(len(values) == x.dim(),
          f"{fn}: {name} has {len(values)} entries but the input has {x.dim()} dimensions.")


def npu_slice(x, offsets, size):
    """x[o0:o0+s0, o1:o1+s1, ...], one (offset, size) per dimension."""
    _check_rank("npu_slice", x, "offsets", offsets)
    _check_rank("npu_slice", x, "size", size)
    out = x
    for dim, (o, s) in enumerate(zip(offsets, size)):
        check(0 <= o and 0 <= s and o + s <= x.shape[dim],
              f"npu_slice: offset {o} + size {s} is out of range for dimension {dim} of size {x.shape[dim]}.")
        out = out.narrow(dim, o, s)
    return _fresh(out, x)


def npu_indexing(x, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0,
                 shrink_axis_mask=0):
    """TensorFlow's StridedSlice: x[b0:e0:s0, ...]; bit i of begin_mask / end_mask
    ignores begin[i] / end[i], bit i of shrink_axis_mask keeps only element begin[i]."""
    check(ellipsis_mask == 0 and new_axis_mask == 0,
          "npu_indexing: ellipsis_mask and new_axis_mask are not supported on vNPU; "
          "index the tensor with Python slicing instead.")
    check(len(begin) == len(end) == len(strides),
          f"npu_indexing: begin, end and strides should have the same length, got {len(begin)}, "
          f"{len(end)} and {len(strides)}.")
    check(len(begin) <= x.dim(), f"npu_indexing: {len(begin)} slices for a {x.dim()}-dimensional input.")
    index = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        check(s > 0, f"npu_indexing: strides[{i}] is {s}; vNPU supports positive strides only.")
        if shrink_axis_mask >> i & 1:
            index.append(b)
            continue
        index.append(slice(None if begin_mask >> i & 1 else b, None if end_mask >> i & 1 else e, s))
    return _fresh(x[tuple(index)], x)


def npu_broadcast(x, size):
    return _fresh(x.expand(size), x)


def npu_transpose(x, perm, require_contiguous=True):
    """x.permute(perm), contiguous; perm may count dimensions from the end (-1 is the last), as permute does."""
    n = x.dim()
    normal = [p + n if -n <= p < 0 else p for p in perm]
    check(sorted(normal) == list(range(n)),
          f"npu_transpose: perm {list(perm)} is not a permutation of the {n} dimensions.")
    return _fresh(x.permute(normal), x)


def npu_reshape(x, shape, can_refresh=False):
    return _fresh(x.reshape(shape), x)


def npu_stride_add(x1, x2, offset1, offset2, c1_len):
    """x1[:, offset1:] + x2[:, offset2:] on 5HD inputs (N, C1, H, W, C0), each
    zero-padded along C1 to the 16 * c1_len channels of the result."""
    check(x1.dim() == 5 and x2.dim() == 5, "npu_stride_add: both inputs should be 5-dimensional (NC1HWC0).")
    channels = 16 * int(c1_len)

    def padded(t, offset):
        t = t[:, int(offset):]
        check(t.shape[1] <= channels, f"npu_stride_add: {t.shape[1]} channels do not fit in c1_len {c1_len}.")
        return F.pad(t, (0, 0, 0, 0, 0, 0, 0, channels - t.shape[1]))

    return padded(x1, offset1) + padded(x2, offset2)


def npu_stride_copy(x, shape, stride, storage_offset):
    """A contiguous copy of the strided view (shape, stride, storage_offset) of x's elements."""
    flat = x.contiguous().reshape(-1)
    return flat.as_strided(shape, stride, flat.storage_offset() + int(storage_offset)).clone()


def npu_sort_v2(x, dim=-1, descending=False):
    return torch.sort(x, dim=dim, descending=descending).values


def npu_one_hot(x, num_classes=-1, depth=1, on_value=1, off_value=0):
    """float32 (*x.shape, depth): on_value where x == k, off_value elsewhere;
    an index outside [0, depth) gives a row of off_value."""
    check(not x.is_floating_point(), f"npu_one_hot: indices should be an integer tensor, got {x.dtype}.")
    check(depth >= 1, f"npu_one_hot: depth should be positive, got {depth}.")
    classes = torch.arange(depth, device=x.device)
    hot = x.unsqueeze(-1) == classes
    return torch.where(hot, torch.tensor(float(on_value), device=x.device),
                       torch.tensor(float(off_value), device=x.device))


def npu_scatter(x, indices, updates, dim):
    """x with x[..., indices[j], ...] = updates[j] along dim, where indices and
    updates have x's shape without dim (the inverse of an argmax along dim)."""
    dim = dim % x.dim()
    want = list(x.shape[:dim]) + list(x.shape[dim + 1:])
    check(list(indices.shape) == want and list(updates.shape) == want,
          f"npu_scatter: indices and updates should have shape {want} (the input without dimension {dim}), "
          f"got {list(indices.shape)} and {list(updates.shape)}.")
    return x.scatter(dim, indices.long().unsqueeze(dim), updates.to(x.dtype).unsqueeze(dim))


def _scatter_update_check(x, indices, updates, axis):
    axis = axis % x.dim()
    check(axis != 0, "scatter_update: axis should not be the batch dimension 0.")
    check(indices.dim() == 1 and indices.shape[0] == x.shape[0],
          f"scatter_update: indices should have one entry per batch ({x.shape[0]}), got shape {list(indices.shape)}.")
    check(updates.dim() == x.dim(), "scatter_update: updates should have as many dimensions as the input.")
    return axis


def _scatter_update_into(out, indices, updates, axis):
    # Batch b receives updates[b] at positions indices[b] .. indices[b] + L - 1 along axis.
    length = updates.shape[axis]
    pos = indices.long().view(-1, *([1] * (out.dim() - 1))) + torch.arange(length, device=out.device).view(
        *([1] * axis), length, *([1] * (out.dim() - axis - 1)))
    return out.scatter_(axis, pos.expand(updates.shape), updates.to(out.dtype))


def scatter_update(x, indices, updates, axis):
    axis = _scatter_update_check(x, indices, updates, axis)
    return _scatter_update_into(x.clone(), indices, updates, axis)


def scatter_update_(x, indices, updates, axis):
    axis = _scatter_update_check(x, indices, updates, axis)
    return _scatter_update_into(x, indices, updates, axis)


def one_(x):
    return x.fill_(1)


def npu_pad(x, paddings):
    """paddings = [before_0, after_0, before_1, after_1, ...] from the first
    dimension on; zeros are added."""
    check(len(paddings) % 2 == 0 and len(paddings) <= 2 * x.dim(),
          f"npu_pad: paddings should hold a (before, after) pair for each padded dimension, got {list(paddings)}.")
    pairs = [paddings[i:i + 2] for i in range(0, len(paddings), 2)]
    return F.pad(x, [p for pair in reversed(pairs) for p in pair], "constant", 0)


def npu_sign_bits_pack(x, size):
    """1-D float -> uint8 (size, -1): bit i of a byte is 1 where element i is >= 0
    (little-endian bits), the tail padded with 0 bits to a multiple of 8."""
    check(x.dim() == 1 and x.dtype in (torch.float16, torch.float32),
          f"npu_sign_bits_pack: the input should be a 1-D float16 or float32 tensor, got {x.dim()}-D {x.dtype}.")
    bits = F.pad((x >= 0).to(torch.uint8), (0, -x.numel() % 8)).view(-1, 8)
    weights = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8, device=x.device)
    packed = (bits * weights).sum(-1, dtype=torch.int32).to(torch.uint8)
    check(packed.numel() % size == 0, f"npu_sign_bits_pack: {packed.numel()} bytes do not split into {size} rows.")
    return packed.view(size, -1)


def npu_sign_bits_unpack(x, size, dtype):
    """uint8 -> +1.0 / -1.0 of dtype, shape (size, -1): the inverse of npu_sign_bits_pack."""
    check(x.dtype == torch.uint8, f"npu_sign_bits_unpack: the input should be uint8, got {x.dtype}.")
    check(dtype in (torch.float16, torch.float32),
          f"npu_sign_bits_unpack: dtype should be float16 or float32, got {dtype}.")
    weights = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8, device=x.device)
    bits = (x.reshape(-1, 1) & weights).ne(0).reshape(-1)
    check(bits.numel() % size == 0, f"npu_sign_bits_unpack: {bits.numel()} values do not split into {size} rows.")
    return (bits.to(dtype) * 2 - 1).view(size, -1)


def _extreme(fn, reduce):
    def op(x, dim, keepdim=False):
        if isinstance(dim, str):  # .names_dim: a dimension name of a named tensor
            check(dim in x.names, f"{fn}: name '{dim}' not found in {x.names}.")
            dim = x.names.index(dim)
        values, indices = reduce(x, dim, keepdim)
        return values, indices.to(torch.int32)
    op.__name__ = op.__qualname__ = fn
    return op


npu_max = _extreme("npu_max", torch.max)
npu_min = _extreme("npu_min", torch.min)


def npu_random_choice_with_mask(x, count=256, seed=0, seed2=0):
    """(coordinates int32 (count, x.dim()), mask bool (count,)): up to count
    randomly chosen coordinates of x's True elements; rows past the number of
    True elements are 0 with mask False. seed = seed2 = 0 draws from torch's
    generator, otherwise the draw is reproducible from the seeds."""
    check(x.dtype == torch.bool, f"npu_random_choice_with_mask: the input should be bool, got {x.dtype}.")
    check(1 <= x.dim() <= 5, "npu_random_choice_with_mask: the input should have 1 to 5 dimensions.")
    check(count > 0, f"npu_random_choice_with_mask: count should be positive, got {count}.")
    coords = x.nonzero()
    gen = None
    if seed or seed2:
        gen = torch.Generator().manual_seed((int(seed) << 32) ^ int(seed2))
    order = torch.randperm(coords.shape[0], generator=gen).to(x.device)
    take = min(count, coords.shape[0])
    chosen = coords[order[:take]].to(torch.int32)
    out = torch.zeros(count, x.dim(), dtype=torch.int32, device=x.device)
    out[:take] = chosen
    mask = torch.arange(count, device=x.device) < take
    return out, mask


def _unpack_int4(packed):
    """int32 (..., n) holding 8 signed int4 each, low nibble first -> int8 (..., 8 n)."""
    shifts = torch.arange(0, 32, 4, device=packed.device, dtype=torch.int32)
    nibbles = (packed.unsqueeze(-1) >> shifts) & 0xF
    signed = torch.where(nibbles >= 8, nibbles - 16, nibbles).to(torch.int8)
    return signed.reshape(*packed.shape[:-1], packed.shape[-1] * 8)


def _pack_int4(values):
    """int8 (..., 8 n) in [-8, 7] -> int32 (..., n), eight int4 each, low nibble first."""
    nibbles = (values.to(torch.int32) & 0xF).reshape(*values.shape[:-1], values.shape[-1] // 8, 8)
    shifts = torch.arange(0, 32, 4, device=values.device, dtype=torch.int32)
    return (nibbles << shifts).sum(-1, dtype=torch.int32)


def npu_anti_quant(x, scale, *, offset=None, dst_dtype=None, src_dtype=None):
    """(x + offset) * scale in dst_dtype (float16 by default): int8 x, or int32
    x packing eight int4 values each; scale and offset broadcast to x."""
    for name, t in (("scale", scale), ("offset", offset)):
        check(t is None or t.device == x.device,
              f"Expected all tensors to be on the same device, but found at least two devices, {x.device} and "
              f"{t.device if t is not None else ''}! (npu_anti_quant's {name})")
    if x.dtype == torch.int32 or src_dtype == torch.quint4x2:
        x = _unpack_int4(x)
    check(x.dtype == torch.int8, f"npu_anti_quant: x should be int8 or int32 (packed int4), got {x.dtype}.")
    dst_dtype = torch.float16 if dst_dtype is None else dst_dtype
    check(dst_dtype in (torch.float16, torch.bfloat16),
          f"npu_anti_quant: dst_dtype should be float16 or bfloat16, got {dst_dtype}.")
    y = x.float()
    if offset is not None:
        y = y + offset.float()
    return (y * scale.float()).to(dst_dtype)


def empty_with_swapped_memory(size, dtype=None, device=None):
    """An uninitialised npu tensor. On Ascend its storage is host memory
    mapped into the device's address space (swap memory, to keep large
    optimizer states or KV caches out of HBM); vNPU's device memory is host
    memory already, so this is torch.empty on the npu device."""
    device = torch.device("npu") if device is None else torch.device(device)
    check(device.type == "npu", f"empty_with_swapped_memory: device should be an npu device, got {device}.")
    return torch.empty(size, dtype=dtype, device=device)


def _empty_with_format(fn, size, dtype, layout, device, pin_memory, acl_format):
    device = torch.device("npu", torch.npu.current_device()) if device is None else torch.device(device)
    check(device.type == "npu", f"{fn}: device should be an npu device, got {device}.")
    check(layout in (None, torch.strided), f"{fn}: layout should be torch.strided, got {layout}.")
    out = torch.empty(size, dtype=dtype, device=device, pin_memory=bool(pin_memory))
    base = 0 if len(size) == 4 else 2  # NCHW for 4-d tensors, ND otherwise: npu_format_cast's base formats
    return out if acl_format == base else torch.ops.npu.npu_format_cast(out, acl_format)


# vNPU's blocks start on 512-byte boundaries (runtime/src/caching_allocator.cpp).
_BLOCK_ALIGNMENT = 512


def empty_with_format(size, *, dtype=None, layout=None, device=None, pin_memory=None, acl_format=2,
                      base_addr_aligned_kb=None):
    """An uninitialised npu tensor in the given Ascend storage format
    (torch_npu's native empty_with_format; npu_format_cast checks the format)."""
    if base_addr_aligned_kb is not None:
        check(base_addr_aligned_kb >= 0, f"empty_with_format: base_addr_aligned_kb should be >= 0, got "
              f"{base_addr_aligned_kb}.")
        check(base_addr_aligned_kb * 1024 <= _BLOCK_ALIGNMENT,
              f"empty_with_format: base_addr_aligned_kb={base_addr_aligned_kb} is not supported on vNPU: its "
              f"allocator aligns blocks to {_BLOCK_ALIGNMENT} bytes, not {base_addr_aligned_kb} KiB.")
    return _empty_with_format("empty_with_format", size, dtype, layout, device, pin_memory, acl_format)


def unsafe_empty_with_format(size, *, dtype=None, layout=None, device=None, pin_memory=None, acl_format=2,
                             keep_format=False):
    """empty_with_format without the base-address option; keep_format only
    matters to CANN's format inference, which vNPU does not run."""
    return _empty_with_format("unsafe_empty_with_format", size, dtype, layout, device, pin_memory, acl_format)


define("npu_slice(Tensor self, int[] offsets, int[] size) -> Tensor", npu_slice)


def npu_slice_out(x, offsets, size, *, out):
    result = npu_slice(x, offsets, size)
    out.resize_(result.shape).copy_(result)
    return out


define("npu_slice.out(Tensor self, int[] offsets, int[] size, *, Tensor(a!) out) -> Tensor(a!)", npu_slice_out)
define("npu_indexing(Tensor self, int[] begin, int[] end, int[] strides, int begin_mask=0, int end_mask=0, "
       "int ellipsis_mask=0, int new_axis_mask=0, int shrink_axis_mask=0) -> Tensor", npu_indexing)
define("npu_broadcast(Tensor self, int[] size) -> Tensor", npu_broadcast)
define("npu_transpose(Tensor self, int[] perm, bool require_contiguous=True) -> Tensor", npu_transpose)
define("npu_reshape(Tensor self, int[] shape, bool can_refresh=False) -> Tensor", npu_reshape)
define("npu_stride_add(Tensor self, Tensor other, Scalar offset1, Scalar offset2, Scalar c1_len) -> Tensor",
       npu_stride_add)
define("npu_stride_copy(Tensor self, int[] shape, int[] stride, Scalar storage_offset) -> Tensor", npu_stride_copy)
define("npu_sort_v2(Tensor self, int dim=-1, bool descending=False) -> Tensor", npu_sort_v2)
define("npu_one_hot(Tensor self, int num_classes=-1, int depth=1, Scalar on_value=1, Scalar off_value=0) -> Tensor",
       npu_one_hot)
define("npu_scatter(Tensor self, Tensor indices, Tensor updates, int dim) -> Tensor", npu_scatter)
define_mutating("scatter_update(Tensor self, Tensor indices, Tensor updates, int axis) -> Tensor", scatter_update,
                "scatter_update_(Tensor(a!) self, Tensor indices, Tensor updates, int axis) -> Tensor(a!)",
                scatter_update_)
define("one_(Tensor(a!) self) -> Tensor(a!)", one_)
define("npu_pad(Tensor input, int[] paddings) -> Tensor", npu_pad, differentiable=False)  # no backward in torch_npu
define("npu_sign_bits_pack(Tensor self, int size) -> Tensor", npu_sign_bits_pack)
define("npu_sign_bits_unpack(Tensor input, int size, ScalarType dtype) -> Tensor", npu_sign_bits_unpack)
define("npu_max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
       npu_max)
define("npu_max.names_dim(Tensor self, str dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
       npu_max, export=False)
define("npu_min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
       npu_min)
define("npu_min.names_dim(Tensor self, str dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
       npu_min, export=False)
define("npu_anti_quant(Tensor x, Tensor scale, *, Tensor? offset=None, ScalarType? dst_dtype=None, "
       "ScalarType? src_dtype=None) -> Tensor", npu_anti_quant)
define("empty_with_format(int[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
       "bool? pin_memory=None, int acl_format=2, int? base_addr_aligned_kb=None) -> Tensor", empty_with_format)
define("unsafe_empty_with_format(int[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
       "bool? pin_memory=None, int acl_format=2, bool keep_format=False) -> Tensor", unsafe_empty_with_format)
define("empty_with_swapped_memory(int[] size, ScalarType? dtype=None, Device? device=None) -> Tensor",
       empty_with_swapped_memory)
define("npu_random_choice_with_mask(Tensor x, int count=256, int seed=0, int seed2=0) -> (Tensor, Tensor)",
       npu_random_choice_with_mask)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
