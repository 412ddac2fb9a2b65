"""Legacy tensor types: torch.npu.FloatTensor(2, 3), torch.npu.LongTensor([1, 2]) ...

Like torch.cuda.FloatTensor: calling one makes an npu tensor of that dtype
(from sizes or from data), and isinstance(t, torch.npu.FloatTensor) is True
for npu tensors of that dtype.
"""

import torch

_TYPES = {
    "FloatTensor": torch.float32, "DoubleTensor": torch.float64, "HalfTensor": torch.float16,
    "BFloat16Tensor": torch.bfloat16, "ByteTensor": torch.uint8, "CharTensor": torch.int8,
    "ShortTensor": torch.int16, "IntTensor": torch.int32, "LongTensor": torch.int64,
    "BoolTensor": torch.bool,
}


class _LegacyTensorMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Tensor) and obj.device.type == "npu" and obj.dtype == cls.dtype


def _make(name, dtype):
    def __new__(cls, *args, size=None, device=None):
        target = torch.device("npu") if device is None else torch.device(device)
        if target.type != "npu":
            raise RuntimeError(f"torch.npu.{name}: expected an npu device, got {target}")
        if size is not None:  # torch.LongTensor(size=(2, 3)), as torch's legacy constructors take it
            if args:
                raise TypeError(f"torch.npu.{name}() takes sizes either positionally or as size=, not both")
            return torch.empty(tuple(size), dtype=dtype, device=target)
        if len(args) == 1 and isinstance(args[0], torch.Size):  # FloatTensor(t.size()): sizes, as torch's
            return torch.empty(args[0], dtype=dtype, device=target)
        if len(args) == 1 and not isinstance(args[0], int):
            data = args[0]
            if isinstance(data, torch.Tensor):
                return data.to(device=target, dtype=dtype)
            return torch.tensor(data, dtype=dtype, device=target)
        if not all(isinstance(a, int) for a in args):
            raise TypeError(f"torch.npu.{name}() expects sizes (ints) or data, got {args!r}")
        return torch.empty(args, dtype=dtype, device=target)

    cls = _LegacyTensorMeta(name, (), {"__new__": __new__, "dtype": dtype, "is_npu": True,
                                       "__doc__": f"npu tensor of dtype {dtype} (legacy constructor)."})
    # Tensor.type(cls) reads the class's C-level name, as for torch.cuda.FloatTensor (whose name is
    # "torch.cuda.FloatTensor"): a heap type's is its __name__. Module and qualified name keep its
    # repr and pickling as torch.npu.FloatTensor.
    cls.__name__, cls.__qualname__, cls.__module__ = f"torch.npu.{name}", name, "torch.npu"
    return cls


globals().update({name: _make(name, dtype) for name, dtype in _TYPES.items()})
__all__ = list(_TYPES)
