"""``torch_npu.HiFloat8Tensor``: a tensor whose elements are stored as HiFloat8 bytes.

Real torch_npu's ``_HiFloat8Tensor`` (exported as ``torch_npu.HiFloat8Tensor``)
is a wrapper tensor subclass: it presents a nominal floating dtype (float32 by
default, or the dtype of the tensor it was made from) and shape, while its
``_data`` is a ``torch.uint8`` tensor of HiFloat8 codes on the npu. vNPU's class
has the same public API:

- ``HiFloat8Tensor(*, data, dtype=torch.float32)``: wrap 8-bit codes (moved to
  npu; ValueError for a non-8-bit or differentiable buffer);
  ``HiFloat8Tensor.make_like(tensor, *, data, **kwargs)``.
- ``HiFloat8Tensor.to_hifloat8(tensor)``: encode (float32 / float16 / bfloat16
  keep their dtype as the nominal one, anything else goes through float32);
  ``from_hifloat8(dtype=None)``, ``float()``, ``bfloat16()``, ``half()``,
  ``cpu()``: decode. Both are identities for autograd.
- ``clone``, ``view``, ``reshape``, ``contiguous``, ``transpose``, ``to_dtype``
  return HiFloat8Tensors over the same (or copied) codes.
- ``__torch_dispatch__``: ``copy_`` (between HiFloat8Tensors the codes are
  copied; into one, the source is encoded; out of one, decoded), ``slice``,
  ``view`` and ``detach`` keep the codes; every other operator runs on the
  decoded values (nominal dtype) and returns ordinary tensors, and an in-place
  operator writes its result back into the HiFloat8Tensor it modified,
  re-encoded. ``.data = t`` encodes ``t`` into the codes.
- Pickling (``torch.save``) keeps the codes and the nominal dtype.

Emulation choices: the encoding and decoding that real torch_npu runs as
``torch_npu._C._cd`` cast kernels are torch_npu/_hifloat8.py's ATen
compositions (round to nearest, ties away from zero, finite values saturating
at +-32768, NaN -> 0x80, +-inf -> 0x6F / 0xEF), queued on the npu stream like
any operator. In-place operators and ``copy_`` return the modified
HiFloat8Tensor (real torch_npu returns None from them).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch.utils._pytree import tree_map

from torch_npu import _hifloat8

__all__ = []

_aten = torch.ops.aten

# The casts keep these dtypes as the nominal one; any other input is converted to float32 before encoding.
_NOMINAL_KEPT = frozenset((torch.float32, torch.float16, torch.bfloat16))


# ---------------------------------------------------------------------------------------------- values <-> codes
#
# A HiFloat8Tensor's ``_data`` may hold any 1-byte dtype (float8_e4m3fn buffers are accepted, as in torch_npu);
# the codec works on the raw bytes, so every read and write goes through a uint8 view of it.

def _raw_bytes(buffer: torch.Tensor) -> torch.Tensor:
    if buffer.dtype is torch.uint8:
        return buffer
    return buffer.view(torch.uint8)


def _values_of(hf8: _HiFloat8Tensor, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """An ordinary tensor with what ``hf8`` holds, in ``dtype`` (its nominal dtype when None)."""
    return _hifloat8.decode(_raw_bytes(hf8._data), dtype=dtype or hf8.dtype)


def _store_values(hf8: _HiFloat8Tensor, values: torch.Tensor) -> None:
    """Rounds ``values`` to HiFloat8 and writes them over ``hf8``'s codes (broadcasting, crossing devices)."""
    target = hf8._data
    values = values.expand(target.shape).to(device=target.device)
    if not values.is_floating_point():
        values = values.float()
    _raw_bytes(target).copy_(_hifloat8.encode(values))


# ---------------------------------------------------------------------------------------------- autograd
#
# Rounding to HiFloat8 has no useful derivative, so every cast and every re-layout of the codes is
# straight-through: the gradient passes unchanged, only brought back to the input's shape, layout, dtype
# or device. One Function serves them all; ``forward_fn`` builds the output, ``grad_fn`` maps the gradient.

class _StraightThrough(torch.autograd.Function):

    @staticmethod
    def forward(ctx, source, forward_fn, grad_fn):
        ctx.grad_fn = grad_fn
        return forward_fn(source)

    @staticmethod
    def backward(ctx, grad):
        return ctx.grad_fn(grad), None, None


def _relayout(hf8: _HiFloat8Tensor, codes: torch.Tensor) -> _HiFloat8Tensor:
    """``hf8``'s values over ``codes`` (a copy or view of its codes with another shape or layout)."""
    shape, dtype = hf8.shape, hf8.dtype

    def grad_back(grad):
        return grad.reshape(shape).to(dtype)

    return _StraightThrough.apply(hf8, lambda t: _HiFloat8Tensor.make_like(t, data=codes), grad_back)


def _cast_to_hifloat8(tensor: torch.Tensor) -> _HiFloat8Tensor:
    device, dtype = tensor.device, tensor.dtype

    def encode(t):
        t = t.detach().contiguous().npu()
        if t.dtype not in _NOMINAL_KEPT:
            t = t.float()
        return _HiFloat8Tensor(data=_hifloat8.encode(t), dtype=t.dtype)

    return _StraightThrough.apply(tensor, encode, lambda grad: grad.to(device=device, dtype=dtype))


# ---------------------------------------------------------------------------------------------- dispatch
#
# Below autograd every aten operator reaches __torch_dispatch__. Three kinds are handled on the codes
# (copies, and the views that must stay HiFloat8Tensors so writes reach the original); everything else
# runs on decoded values and gives ordinary tensors back.

def _copy(dst, src):
    if not (isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor)):
        raise RuntimeError("HiFloat8Tensor copy_: both the destination and the source should be tensors")
    dst_is_hf8 = isinstance(dst, _HiFloat8Tensor)
    src_is_hf8 = isinstance(src, _HiFloat8Tensor)
    if not dst_is_hf8:
        dst.copy_(_values_of(src))          # a plain tensor receives the decoded values
    elif src_is_hf8:
        dst._data.copy_(src._data)          # code to code: nothing to round
    else:
        _store_values(dst, src)
    return dst


def _on_codes(func, hf8, *rest, **kwargs):
    """Applies a view operator to ``hf8``'s codes, so the result shares (and writes into) them."""
    return _HiFloat8Tensor.make_like(hf8, data=func(hf8._data, *rest, **kwargs))


_CODE_VIEWS = (_aten.slice.Tensor, _aten.view.default)


def _written_arguments(schema, args, kwargs):
    """Yields (position or name) of each argument the operator writes into, as passed by the caller."""
    for index, argument in enumerate(schema.arguments):
        alias = argument.alias_info
        if alias is None or not alias.is_write:
            continue
        if index < len(args):
            yield index
        elif argument.name in kwargs:
            yield argument.name


def _run_on_values(func, args, kwargs):
    decode = lambda x: _values_of(x) if isinstance(x, _HiFloat8Tensor) else x  # noqa: E731
    plain_args = tree_map(decode, args)
    plain_kwargs = tree_map(decode, kwargs)
    result = func(*plain_args, **plain_kwargs)
    if not func._schema.is_mutable:
        return result

    # The operator wrote into decoded copies. Round what it wrote back into the HiFloat8Tensors, and hand
    # those back wherever the result names a copy (``r = h.mul_(3)`` gives ``h``).
    stand_ins = {}
    for key in _written_arguments(func._schema, args, kwargs):
        where = args if isinstance(key, int) else kwargs
        plain_where = plain_args if isinstance(key, int) else plain_kwargs
        originals, copies = where[key], plain_where[key]
        if not isinstance(originals, (list, tuple)):    # Tensor(a!) rather than Tensor(a!)[]
            originals, copies = [originals], [copies]
        for original, copy in zip(originals, copies):
            if isinstance(original, _HiFloat8Tensor) and isinstance(copy, torch.Tensor):
                _store_values(original, copy)
                stand_ins[id(copy)] = original
    return tree_map(lambda x: stand_ins.get(id(x), x) if isinstance(x, torch.Tensor) else x, result)


# ---------------------------------------------------------------------------------------------- the tensor

class _HiFloat8Tensor(torch.Tensor):
    """Shows ``dtype`` and ``data``'s shape and strides; its elements are the HiFloat8 codes in ``data``.

    ``data``: 8-bit tensor of codes (moved to npu), must not require grad.
    ``dtype``: the nominal floating dtype, the one operators see the values in.
    """

    def __new__(cls, *, data: torch.Tensor, dtype: torch.dtype = torch.float32):
        _check_codes_and_dtype(data, dtype)
        if data.device.type != "npu":
            data = data.npu()
        wrapper = torch.Tensor._make_wrapper_subclass(
            cls, data.size(), strides=data.stride(), storage_offset=data.storage_offset(),
            dtype=dtype, layout=data.layout, device=data.device, requires_grad=False)
        wrapper._data = data
        return wrapper

    # torch functions reach __torch_dispatch__ without subclass-preserving wrapping of their results.
    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _aten.copy_.default:
            return _copy(args[0], args[1])
        if func in _CODE_VIEWS:
            return _on_codes(func, *args, **kwargs)
        if func is _aten.detach.default:
            return cls.make_like(args[0], data=args[0]._data)
        return _run_on_values(func, args, kwargs)

    @classmethod
    def make_like(cls, tensor: _HiFloat8Tensor, *, data: torch.Tensor, **kwargs) -> _HiFloat8Tensor:
        """A HiFloat8Tensor over ``data``; attributes not given in ``kwargs`` come from ``tensor``."""
        return _HiFloat8Tensor(data=data, **{"dtype": tensor.dtype, **kwargs})

    def __repr__(self, *, tensor_contents=None):
        return f"HiFloat8Tensor(data={self.from_hifloat8(dtype=self.dtype)})"

    # -- casts (straight-through for autograd)

    @classmethod
    def to_hifloat8(cls, tensor: torch.Tensor):
        """``tensor`` rounded to HiFloat8, as a HiFloat8Tensor on npu."""
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"HiFloat8Tensor.to_hifloat8: expected a tensor, got {type(tensor).__name__}")
        if isinstance(tensor, _HiFloat8Tensor):
            tensor = tensor.from_hifloat8()
        return _cast_to_hifloat8(tensor)

    def from_hifloat8(self, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
        """The values as an ordinary tensor of ``dtype`` (the nominal dtype when None)."""
        return _StraightThrough.apply(self, lambda t: _values_of(t, dtype).detach(), lambda grad: grad)

    def float(self) -> torch.Tensor:
        return self.from_hifloat8(torch.float32)

    def half(self) -> torch.Tensor:
        return self.from_hifloat8(torch.float16)

    def bfloat16(self) -> torch.Tensor:
        return self.from_hifloat8(torch.bfloat16)

    def cpu(self) -> torch.Tensor:
        return self.from_hifloat8().cpu()

    def to_dtype(self, dtype: torch.dtype) -> _HiFloat8Tensor:
        """The same codes read with another nominal dtype."""
        return self.make_like(self, data=self._data, dtype=dtype)

    # -- new layouts of the codes

    def view(self, *shape: Tuple[int]) -> _HiFloat8Tensor:
        return _relayout(self, self._data.view(*shape))

    def reshape(self, *shape: Tuple[int]) -> _HiFloat8Tensor:
        return _relayout(self, self._data.reshape(*shape))

    def clone(self) -> _HiFloat8Tensor:
        return _relayout(self, self._data.detach().clone())

    def contiguous(self, *, memory_format: torch.memory_format = torch.contiguous_format) -> _HiFloat8Tensor:
        codes = self._data
        if codes.is_contiguous(memory_format=memory_format):
            return self
        return _relayout(self, codes.detach().contiguous(memory_format=memory_format))

    def transpose(self, dim0, dim1):
        return _StraightThrough.apply(
            self,
            lambda t: t.make_like(t, data=t._data.transpose(dim0, dim1)),
            lambda grad: grad.transpose(dim0, dim1))

    # -- ``.data``: reading gives a detached HiFloat8Tensor over the same codes (what detach dispatches to),
    #    assigning rounds the new values into the codes instead of swapping the tensor's storage.

    @property
    def data(self) -> _HiFloat8Tensor:
        return super().data

    @data.setter
    def data(self, values: torch.Tensor) -> None:
        with torch.no_grad():
            self.copy_(values)

    # -- pickling: the codes and the nominal dtype. The rebuild hook keeps torch_npu's name so that
    #    checkpoints saved by either load in the other.

    def __reduce_ex__(self, protocol: int) -> tuple:
        return _HiFloat8Tensor._make_in_reduce_ex, (self._data, self.dtype)

    @classmethod
    def _make_in_reduce_ex(cls, data: torch.Tensor, dtype: torch.dtype) -> _HiFloat8Tensor:
        return cls(data=data, dtype=dtype)


def _check_codes_and_dtype(data, dtype):
    if not isinstance(data, torch.Tensor):
        raise TypeError(f"HiFloat8Tensor: data should be a tensor, got {type(data).__name__}")
    if data.element_size() != 1:
        raise ValueError(f"HiFloat8Tensor requires data buffer with 8-bit dtype (got dtype={data.dtype})")
    if data.requires_grad:
        raise ValueError("HiFloat8Tensor requires non-differentiable data buffer")
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise ValueError(f"HiFloat8Tensor: the nominal dtype should be a floating-point dtype, got {dtype}")


HiFloat8Tensor = _HiFloat8Tensor
