"""npu_dtype_cast and its relatives: casts whose target is an ``int`` dtype code.

op-plugin's ``npu_dtype_cast(Tensor self, int dtype, int? input_dtype=None)``
takes either a torch dtype (which reaches an ``int`` argument as its
ScalarType number) or one of torch_npu's dtype constants (the ACL data type
number + 256, torch_npu/_dtypes.py), so that it can produce the formats torch
has no dtype for. Of those, vNPU casts to and from HiFloat8, whose bytes live
in uint8 tensors as on the chip (torch_npu/_hifloat8.py); ``input_dtype``
says how to read self's bytes (``torch_npu.hifloat8`` for uint8 codes). The
packed 4-bit and 6-bit formats are refused by name.

Autograd, as op-plugin's derivatives.yaml has it: the gradient is cast back
to self's dtype by ``npu_dtype_cast_backward``, which marks the incoming
gradient as requiring grad, so a gradient taken with ``create_graph=True``
has a grad_fn (real torch_npu's test_npu_dtype_cast_double_backward).
"""

import torch

from torch_npu import _dtypes, _hifloat8
from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define

_HIFLOAT8 = _dtypes.DType.hifloat8


def _resolve(fn, name, code):
    """The torch dtype a dtype code (or a torch.dtype) stands for, or "hifloat8"."""
    if isinstance(code, torch.dtype):
        return code
    code = int(code)
    if code < _dtypes.ACL_OFFSET:
        check(code in _dtypes.SCALAR_TYPES, f"{fn}: {name}={code} is not a torch dtype vNPU can cast to or from.")
        return _dtypes.SCALAR_TYPES[code]
    label = _dtypes.NAMES.get(code)
    check(label is not None, f"{fn}: {name}={code} is neither a torch dtype nor a torch_npu dtype constant "
          "(torch_npu.float16, torch_npu.hifloat8, ...).")
    short = label.replace("torch_npu.", "")
    if code == _HIFLOAT8:
        return "hifloat8"
    check(short in _dtypes.TORCH_DTYPES, f"{fn}: {name}={label} is not supported on vNPU: its packed sub-byte storage "
          "(int4, float4, float6 ...) has no cast here; HiFloat8 and every dtype torch has are supported.")
    return _dtypes.TORCH_DTYPES[short]


def _values(fn, x, input_dtype):
    """self read as input_dtype says: HiFloat8 codes decoded, anything else as it is."""
    if input_dtype is None:
        return x
    source = _resolve(fn, "input_dtype", input_dtype)
    if source == "hifloat8":
        check(x.dtype in (torch.uint8, torch.int8), f"{fn}: input_dtype=torch_npu.hifloat8 reads HiFloat8 codes "
              f"from uint8 / int8 bytes, got {x.dtype}.")
        return _hifloat8.decode(x)
    check(source == x.dtype, f"{fn}: input_dtype={source} does not match the input's dtype {x.dtype}; it only "
          "reinterprets bytes for torch_npu's own formats (torch_npu.hifloat8).")
    return x


def _cast(fn, x, dtype, input_dtype):
    target = _resolve(fn, "dtype", dtype)
    values = _values(fn, x, input_dtype)
    if target == "hifloat8":
        check(values.is_floating_point(), f"{fn}: a cast to torch_npu.hifloat8 takes floating-point input, "
              f"got {values.dtype}.")
        return _hifloat8.encode(values)
    return values.to(target)


class NpuDtypeCast(torch.autograd.Function):
    """The cast, with grad_fn NpuDtypeCastBackward as in torch_npu (scripts
    check the name); the gradient goes back to self's dtype."""

    @staticmethod
    def forward(ctx, x, dtype, input_dtype):
        ctx.source_dtype = x.dtype
        ctx.codes = (None if isinstance(dtype, torch.dtype) else dtype, input_dtype)
        out = _cast("npu_dtype_cast", x, dtype, input_dtype)
        return out.clone() if out is x else out

    @staticmethod
    def backward(ctx, grad):
        dtype, input_dtype = ctx.codes
        grad_dtype = None if dtype is None or dtype < _dtypes.ACL_OFFSET else dtype
        return npu_dtype_cast_backward(grad, ctx.source_dtype, grad_dtype, input_dtype), None, None


def npu_dtype_cast(x, dtype, input_dtype=None):
    differentiable = x.is_floating_point() or x.is_complex()
    if differentiable and torch.is_grad_enabled() and x.requires_grad:
        return NpuDtypeCast.apply(x, dtype, input_dtype)
    out = _cast("npu_dtype_cast", x, dtype, input_dtype)
    return out.clone() if out is x else out


def _npu_dtype_cast(x, dtype):
    return npu_dtype_cast(x, dtype)


def npu_dtype_cast_(x, src):
    """Copies src into x, cast to x's dtype."""
    return x.copy_(src)


def _requires_grad_in_graph(grad):
    # As op-plugin's backward kernels: under create_graph the incoming gradient
    # is marked as requiring grad, so the cast back records a graph.
    differentiable = grad.is_floating_point() or grad.is_complex()
    if differentiable and torch.is_grad_enabled() and not grad.requires_grad and grad.is_leaf:
        grad.requires_grad_()
    return grad


def npu_dtype_cast_backward(grad, dtype, grad_dtype=None, input_dtype=None):
    """grad cast to dtype (self's); grad_dtype says how to read grad's bytes
    (a HiFloat8 gradient), input_dtype which format self had."""
    grad = _requires_grad_in_graph(grad)
    values = _values("npu_dtype_cast_backward", grad, grad_dtype)
    if input_dtype is not None and _resolve("npu_dtype_cast_backward", "input_dtype", input_dtype) == "hifloat8":
        return _hifloat8.encode(values)
    return values.to(dtype)


def _npu_dtype_cast_backward(grad, dtype):
    return _requires_grad_in_graph(grad).to(dtype)


define("npu_dtype_cast(Tensor self, int dtype, int? input_dtype=None) -> Tensor", npu_dtype_cast)
define("_npu_dtype_cast(Tensor self, ScalarType dtype) -> Tensor", _npu_dtype_cast)
define("npu_dtype_cast_(Tensor(a!) self, Tensor src) -> Tensor(a!)", npu_dtype_cast_)
define("npu_dtype_cast_backward(Tensor grad, ScalarType dtype, int? grad_dtype=None, int? input_dtype=None) "
       "-> Tensor", npu_dtype_cast_backward)
define("_npu_dtype_cast_backward(Tensor grad, ScalarType dtype) -> Tensor", _npu_dtype_cast_backward)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
