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

aten = torch.ops.aten

# Nominal dtypes whose values the casts keep as they are; others go through float32.
_CAST_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _codes(data):
    """The uint8 view of an 8-bit buffer."""
    return data if data.dtype == torch.uint8 else data.view(torch.uint8)


def _decode(tensor, dtype=None):
    """The values of a _HiFloat8Tensor's codes, as an ordinary tensor of ``dtype`` (default: nominal dtype)."""
    return _hifloat8.decode(_codes(tensor._data), dtype=tensor.dtype if dtype is None else dtype)


def _encode_into(dst, src):
    """Encodes ``src`` (broadcast to dst's shape, moved to its device) into the codes of _HiFloat8Tensor ``dst``."""
    src = src.expand(dst.size()).to(device=dst._data.device)
    if not src.is_floating_point():
        src = src.float()
    _codes(dst._data).copy_(_hifloat8.encode(src))


class _FromHiFloat8Func(torch.autograd.Function):
    """HiFloat8Tensor -> ordinary tensor of a given dtype; gradients pass unchanged."""

    @staticmethod
    def forward(ctx, tensor, dtype=None):
        return _decode(tensor, dtype).detach()

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _ToHiFloat8Func(torch.autograd.Function):
    """Ordinary tensor -> HiFloat8Tensor on npu; gradients pass unchanged."""

    @staticmethod
    def forward(ctx, tensor):
        ctx.device, ctx.dtype = tensor.device, tensor.dtype
        tensor = tensor.detach().contiguous().npu()
        if tensor.dtype not in _CAST_DTYPES:
            tensor = tensor.float()
        return _HiFloat8Tensor(data=_hifloat8.encode(tensor), dtype=tensor.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad.to(device=ctx.device, dtype=ctx.dtype)


class _NewCodesFunc(torch.autograd.Function):
    """A HiFloat8Tensor over other codes (a copy, a view, another layout); gradients pass, reshaped back."""

    @staticmethod
    def forward(ctx, tensor, data, kwargs):
        ctx.shape, ctx.dtype = tensor.shape, tensor.dtype
        return _HiFloat8Tensor.make_like(tensor, data=data, **kwargs)

    @staticmethod
    def backward(ctx, grad):
        if grad.shape != ctx.shape:
            grad = grad.reshape(ctx.shape)
        return grad.to(ctx.dtype), None, None


class _TransposeFunc(torch.autograd.Function):
    """Transposes a HiFloat8Tensor's codes; the gradient is transposed back."""

    @staticmethod
    def forward(ctx, tensor, dim0, dim1):
        ctx.dims = (dim0, dim1)
        return _HiFloat8Tensor.make_like(tensor, data=tensor._data.transpose(dim0, dim1))

    @staticmethod
    def backward(ctx, grad):
        return grad.transpose(*ctx.dims), None, None


class _HiFloat8Tensor(torch.Tensor):
    """A tensor of nominal dtype ``dtype`` whose elements are the HiFloat8 codes in ``data``.

    Parameters
    ----------
    data: torch.Tensor
        the HiFloat8 codes: an 8-bit tensor (torch.uint8), not requiring grad; moved to npu.
    dtype: torch.dtype, default torch.float32
        the nominal dtype: the dtype the tensor shows, and that operators see the values in.
    """

    def __new__(cls, *, data: torch.Tensor, dtype: torch.dtype = torch.float32):
        if not isinstance(data, torch.Tensor):
            raise TypeError(f"HiFloat8Tensor: data should be a tensor, got {type(data).__name__}")
        if data.element_size() != 1:
            raise ValueError(f"HiFloat8Tensor requires data buffer with 8-bit dtype (got dtype={data.dtype})")
        if data.requires_grad:
            raise ValueError("HiFloat8Tensor requires non-differentiable data buffer")
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise ValueError(f"HiFloat8Tensor: the nominal dtype should be a floating-point dtype, got {dtype}")
        if data.device.type != "npu":
            data = data.npu()
        self = torch.Tensor._make_wrapper_subclass(
            cls, data.size(), strides=data.stride(), storage_offset=data.storage_offset(), dtype=dtype,
            layout=data.layout, requires_grad=False, device=data.device)
        self._data = data
        return self

    @classmethod
    def make_like(cls, tensor: _HiFloat8Tensor, *, data: torch.Tensor, **kwargs) -> _HiFloat8Tensor:
        """A _HiFloat8Tensor over ``data`` with ``tensor``'s attributes, unless ``kwargs`` override them."""
        kwargs.setdefault("dtype", tensor.dtype)
        return _HiFloat8Tensor(data=data, **kwargs)

    def __repr__(self, *, tensor_contents=None):
        return f"HiFloat8Tensor(data={self.from_hifloat8(dtype=self.dtype)})"

    def from_hifloat8(self, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
        """The values as an ordinary tensor of ``dtype`` (default: the nominal dtype)."""
        return _FromHiFloat8Func.apply(self, dtype)

    @classmethod
    def to_hifloat8(cls, tensor: torch.Tensor):
        """A _HiFloat8Tensor on npu holding ``tensor`` rounded to HiFloat8."""
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"HiFloat8Tensor.to_hifloat8: expected a tensor, got {type(tensor).__name__}")
        if isinstance(tensor, _HiFloat8Tensor):
            tensor = tensor.from_hifloat8()
        return _ToHiFloat8Func.apply(tensor)

    def float(self) -> torch.Tensor:
        return self.from_hifloat8(dtype=torch.float32)

    def bfloat16(self) -> torch.Tensor:
        return self.from_hifloat8(dtype=torch.bfloat16)

    def half(self) -> torch.Tensor:
        return self.from_hifloat8(dtype=torch.float16)

    def cpu(self) -> torch.Tensor:
        return self.from_hifloat8().cpu()

    def clone(self) -> _HiFloat8Tensor:
        return _NewCodesFunc.apply(self, self._data.detach().clone(), {})

    def view(self, *shape: Tuple[int]) -> _HiFloat8Tensor:
        return _NewCodesFunc.apply(self, self._data.view(*shape), {})

    def reshape(self, *shape: Tuple[int]) -> _HiFloat8Tensor:
        return _NewCodesFunc.apply(self, self._data.reshape(*shape), {})

    def contiguous(self, *, memory_format: torch.memory_format = torch.contiguous_format) -> _HiFloat8Tensor:
        """``self`` if its codes are laid out in ``memory_format`` already, else a copy that is."""
        if self._data.is_contiguous(memory_format=memory_format):
            return self
        return _NewCodesFunc.apply(self, self._data.detach().contiguous(memory_format=memory_format), {})

    def to_dtype(self, dtype: torch.dtype) -> _HiFloat8Tensor:
        """A _HiFloat8Tensor over the same codes with nominal dtype ``dtype``."""
        return _HiFloat8Tensor.make_like(self, data=self._data, dtype=dtype)

    def transpose(self, dim0, dim1):
        return _TransposeFunc.apply(self, dim0, dim1)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is aten.copy_.default:
            dst, src = args[0], args[1]
            if not isinstance(dst, torch.Tensor) or not isinstance(src, torch.Tensor):
                raise RuntimeError("HiFloat8Tensor copy_: both the destination and the source should be tensors")
            if isinstance(dst, _HiFloat8Tensor) and isinstance(src, _HiFloat8Tensor):
                dst._data.copy_(src._data.to(dst._data.dtype) if src._data.dtype != dst._data.dtype
                                else src._data)
            elif isinstance(src, _HiFloat8Tensor):
                dst.copy_(_decode(src))
            else:
                _encode_into(dst, src)
            return dst
        if func in (aten.slice.Tensor, aten.view.default):
            tensor = args[0]
            return _HiFloat8Tensor.make_like(tensor, data=func(tensor._data, *args[1:], **kwargs))
        if func is aten.detach.default:
            return _HiFloat8Tensor.make_like(args[0], data=args[0]._data)

        def unwrap(t):
            return _decode(t) if isinstance(t, _HiFloat8Tensor) else t

        new_args, new_kwargs = tree_map(unwrap, args), tree_map(unwrap, kwargs)
        out = func(*new_args, **new_kwargs)
        if not func._schema.is_mutable:
            return out
        # An in-place / out= operator wrote into the decoded copies: encode what it wrote back into the codes.
        originals = {}
        for schema_arg, arg, new_arg in _bound(func._schema, args, kwargs, new_args, new_kwargs):
            if schema_arg.alias_info is None or not schema_arg.alias_info.is_write:
                continue
            pairs = zip(arg, new_arg) if isinstance(arg, (list, tuple)) else [(arg, new_arg)]  # Tensor(a!)[]
            for old, new in pairs:
                if isinstance(old, _HiFloat8Tensor) and isinstance(new, torch.Tensor):
                    _encode_into(old, new)
                    originals[id(new)] = old
        return tree_map(lambda t: originals.get(id(t), t) if isinstance(t, torch.Tensor) else t, out)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return torch._C._disabled_torch_function_impl(func, types, args, kwargs or {})

    @classmethod
    def _make_in_reduce_ex(cls, data: torch.Tensor, dtype: torch.dtype) -> _HiFloat8Tensor:
        """Rebuilds a pickled _HiFloat8Tensor."""
        return _HiFloat8Tensor(data=data, dtype=dtype)

    def __reduce_ex__(self, protocol: int) -> tuple:
        return _HiFloat8Tensor._make_in_reduce_ex, (self._data, self.dtype)

    def _get_data(self) -> _HiFloat8Tensor:
        return super().data

    def _set_data(self, tensor: torch.Tensor) -> None:
        with torch.no_grad():
            self.copy_(tensor)

    # ``t.data`` is a detached HiFloat8Tensor over the same codes; ``t.data = x`` encodes x into them.
    data = property(_get_data, _set_data)


def _bound(schema, args, kwargs, new_args, new_kwargs):
    """(schema argument, original value, unwrapped value) for each argument passed, positional or keyword."""
    triples = []
    for i, schema_arg in enumerate(schema.arguments):
        if i < len(args):
            triples.append((schema_arg, args[i], new_args[i]))
        elif schema_arg.name in kwargs:
            triples.append((schema_arg, kwargs[schema_arg.name], new_kwargs[schema_arg.name]))
    return triples


HiFloat8Tensor = _HiFloat8Tensor
