"""Registers the virtual NPU with PyTorch as the ``npu`` device.

Order matters: the PrivateUse1 backend is renamed before any npu tensor
exists, the C++ side then installs its hooks and kernels, and only then is
``torch.npu`` published and the ``.npu()`` methods generated.
"""

import torch

from torch_npu import _C

_registered = False
sync_native_ops = frozenset()


def register():
    global _registered, sync_native_ops
    if _registered:
        return
    _registered = True
    torch.utils.rename_privateuse1_backend("npu")
    # The C++ side (csrc/api/backend_setup.h), once: also what a C++ program's
    # torch_npu::init_npu sets up without Python.
    sync_native_ops = frozenset(_C._init())
    _C._register_accelerator_graph()  # torch.accelerator.Graph on npu (keyed by the backend's name)

    import torch_npu.npu as npu_module
    torch._register_device_module("npu", npu_module)
    # Quantized storages cannot move to npu, as in torch_npu, which publishes
    # the list as torch_npu.unsupported_dtype (MindSpeed reads it).
    unsupported_dtype = [torch.quint8, torch.quint4x2, torch.quint2x4, torch.qint32, torch.qint8]
    import torch_npu
    torch_npu.unsupported_dtype = unsupported_dtype
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_storage=True, unsupported_dtype=unsupported_dtype)
    # Lazy modules' uninitialized parameters allow a list of methods (.cuda,
    # .to, ...) before materialising; .npu() is one of them, as .cuda() is.
    torch.nn.parameter.UninitializedTensorMixin._allowed_methods.append(torch.Tensor.npu)
    _install_backends_module()
    from torch_npu.npu import comm
    comm._install()  # nn.DataParallel's torch._C._scatter, _broadcast_coalesced, ...


def _install_backends_module():
    """``torch.backends.npu.is_available()``, as the seeds use it."""
    import sys
    import types
    import torch.backends
    mod = types.ModuleType("torch.backends.npu")
    mod.is_available = lambda: torch.npu.is_available()
    mod.__doc__ = "The virtual NPU backend (vNPU)."
    torch.backends.npu = mod
    sys.modules["torch.backends.npu"] = mod
