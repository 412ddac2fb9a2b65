"""Legacy typed storages: torch.npu.FloatStorage(3), torch.npu.BoolStorage([True]) ...

Like torch.cuda.FloatStorage: a TypedStorage of one dtype on npu (created on
the current device), deprecated in favour of torch.UntypedStorage as in
PyTorch, and registered in torch._storage_classes so torch.is_storage and
serialization know them. TypedStorage finds the device from the last part
of the class's module name; the classes report ``torch_npu.npu``, the public
module that defines them in real torch_npu (and where pickle finds them by
name), whose last part is ``npu``.
"""

import torch
from torch.storage import _LegacyStorage, _warn_typed_storage_removal
from torch._utils import classproperty

_STORAGES = {
    "ByteStorage": torch.uint8, "CharStorage": torch.int8, "ShortStorage": torch.int16,
    "IntStorage": torch.int32, "LongStorage": torch.int64, "HalfStorage": torch.float16,
    "FloatStorage": torch.float32, "DoubleStorage": torch.float64, "BFloat16Storage": torch.bfloat16,
    "BoolStorage": torch.bool, "ComplexFloatStorage": torch.complex64, "ComplexDoubleStorage": torch.complex128,
}


class _NpuLegacyStorage(_LegacyStorage):
    # Host-only constructors, refused as torch.cuda's are.
    @classmethod
    def from_buffer(cls, *args, **kwargs):
        _warn_typed_storage_removal()
        raise RuntimeError("from_buffer: Not available for NPU storage")

    @classmethod
    def _new_with_weak_ptr(cls, *args, **kwargs):
        raise RuntimeError("_new_with_weak_ptr: Not available for NPU storage")

    @classmethod
    def _new_shared_filename(cls, manager, obj, size, *, device=None, dtype=None):
        raise RuntimeError("_new_shared_filename: Not available for NPU storage")

# The ten real torch_npu defines (and lists in torch_npu.npu's __all__); the
# complex ones are vNPU's, as torch.cuda has them, and report torch.npu.
_REAL_TORCH_NPU = {"ByteStorage", "CharStorage", "ShortStorage", "IntStorage", "LongStorage", "HalfStorage",
                   "FloatStorage", "DoubleStorage", "BFloat16Storage", "BoolStorage"}


def _make(name, dtype):
    def public_dtype(cls):
        _warn_typed_storage_removal()
        return dtype

    cls = type(name, (_NpuLegacyStorage,), {
        "dtype": classproperty(public_dtype),
        "_dtype": classproperty(lambda cls: dtype),
        "__module__": "torch_npu.npu" if name in _REAL_TORCH_NPU else "torch.npu",
        "__doc__": f"Legacy npu storage of dtype {dtype} (use torch.UntypedStorage).",
    })
    torch._storage_classes.add(cls)
    return cls


globals().update({name: _make(name, dtype) for name, dtype in _STORAGES.items()})
__all__ = list(_STORAGES)
