"""npu as an Inductor device: ``torch.compile`` of npu code.

Device memory is host memory, so Inductor's C++ (CPU) code generation makes
npu's kernels; what is npu's is *when* they run. Each generated kernel keeps
the small Python binding Inductor gives CPU kernels, but on npu the binding
packs the kernel's arguments and queues the call on the current npu stream
(csrc/graph/host_kernel_launch.h) instead of calling it. Everything else in
the generated wrapper is ordinary npu eager code: buffers come from the npu
caching allocator, extern kernels (matmuls, convolutions) are npu ops. So a
compiled graph runs asynchronously, in stream order with the eager work
before and after it, honours ``torch.npu.stream(...)``, and its kernels'
failures reach the next sync like eager kernels'. See docs/graph_mode.md.

Nothing here is imported before the first compilation: the Inductor setup
(torch_npu/utils/_dynamo.py, Note [Lazy Dynamo and Inductor setup]) imports
this package, and PyTorch finds it through the device module too
(``torch.npu.Scheduling``, ``torch.npu.PythonWrapperCodegen``,
``torch.npu.CppWrapperCodegen``, read by Inductor's
``init_backend_registration``). Importing it loads the backend that
TORCHINDUCTOR_NPU_BACKEND names (``_load_backend``); npu's entries in
Inductor's config (``torch._inductor.config.npu_backend``, ...) are added
when that config loads (torch_npu/utils/_dynamo.py).
"""

import os
import warnings

_registered = False
_warned_backends = set()


def codegen_classes():
    """Registers npu with Dynamo (device interface) and Inductor (codegen),
    once; returns the classes the device module answers Inductor with."""
    from torch._inductor.codegen.cpp import CppScheduling

    from torch_npu._inductor.wrapper import NpuCppWrapperUnsupported, NpuPythonWrapperCodegen

    classes = {"Scheduling": CppScheduling, "PythonWrapperCodegen": NpuPythonWrapperCodegen,
               "CppWrapperCodegen": NpuCppWrapperUnsupported, "WrapperFxCodegen": None}
    global _registered
    if not _registered:
        from torch_npu.utils._dynamo import _InductorNpuRegistry
        if _InductorNpuRegistry._disabled_register:
            raise RuntimeError("Inductor has no npu backend: its registration is disabled "
                               "(torch_npu.utils._dynamo.disable_register_inductor_npu()); call "
                               "enable_register_inductor_npu() before compiling npu code.")
        _registered = True
        _register(classes)
    return classes


def _register(classes):
    from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides

    from torch_npu._inductor import graph_partition
    from torch_npu._inductor.wrapper import NpuDeviceOpOverrides
    from torch_npu.utils._dynamo import _dynamo_register_interface_for_device

    _dynamo_register_interface_for_device()  # normally done when Dynamo loaded
    register_device_op_overrides("npu", NpuDeviceOpOverrides())
    register_backend_for_device("npu", classes["Scheduling"], classes["PythonWrapperCodegen"],
                                classes["CppWrapperCodegen"])
    _treat_npu_nodes_as_cpp_kernels()
    graph_partition.install()
    _name_cpp_as_npu_backend()
    _copy_empty_buffers_as_empty_buffers()


def _treat_npu_nodes_as_cpp_kernels():
    """The scheduler guards the C++ backend's limits (no loop reordering, no
    reindexing for fusion) with ``BaseSchedulerNode.is_cpu()``. npu's kernels
    are that backend's, so the guards must hold for npu nodes too (one of the
    two places where Inductor itself is adjusted)."""
    from torch._inductor import scheduler

    def is_cpu(self) -> bool:
        device = self.get_device()
        return device is not None and device.type in ("cpu", "npu")

    scheduler.BaseSchedulerNode.is_cpu = is_cpu


def _copy_empty_buffers_as_empty_buffers():
    """``torch.empty(...).npu()`` compiles to a device copy of an uninitialised
    buffer. Inductor lowers ``empty`` to a buffer whose loop ranges are zeros
    (so that no kernel fills it) and moves a buffer that reads no inputs with
    ``constant_to_device``, which rebuilds it from those ranges: the copy came
    out with shape (0, 0). A copy to npu of such an empty buffer is an empty
    buffer of the same layout on npu instead."""
    from torch._inductor import ir, lowering

    create = ir.DeviceCopy.create.__func__

    def empty_source(x):
        while isinstance(x, ir.MutableBox):
            x = x.data
        if not (isinstance(x, ir.ComputedBuffer) and isinstance(x.data, ir.Pointwise)):
            return None
        ranges, size = x.data.ranges, x.get_size()
        return x if len(ranges) == len(size) and all(r == 0 for r in ranges) and any(s != 0 for s in size) else None

    def device_copy(cls, x, device, non_blocking):
        source = empty_source(x) if device.type == "npu" else None
        if source is not None:
            return lowering.empty_strided(source.get_size(), source.get_stride(), dtype=source.get_dtype(),
                                          device=device).data.data
        return create(cls, x, device, non_blocking)

    ir.DeviceCopy.create = classmethod(device_copy)


def _name_cpp_as_npu_backend():
    """``get_current_backend`` answers ``config.cuda_backend`` ("triton") for
    every device it does not name, and code generation branches on that answer
    (a masked load's dtype, NaN checks): with npu's kernels generated by the
    C++ backend, the triton branches then fail on C++ variables. npu is
    answered like cpu. The function is imported by name into the modules that
    use it, so each binding is replaced."""
    import importlib

    from torch._inductor import config, utils

    inductor_get_current_backend = utils.get_current_backend

    def get_current_backend(device_type=None):
        if device_type is None:
            from torch._inductor.virtualized import V
            device_type = V.graph.get_current_device_or_throw().type
        if device_type == "npu":
            return config.cpu_backend
        return inductor_get_current_backend(device_type)

    for name in ("torch._inductor.utils", "torch._inductor.codegen.common", "torch._inductor.scheduler",
                 "torch._inductor.kernel.mm_common"):
        module = importlib.import_module(name)
        if getattr(module, "get_current_backend", None) is inductor_get_current_backend:
            module.get_current_backend = get_current_backend


def _load_backend():
    """Registers npu's code generation for the ``npu_backend`` the
    environment names (set per compilation by ``_NpuBackendScope``). Real
    torch_npu chooses among code generators for the chip ("default":
    triton-ascend, "mlir", "dvm", "ascendc"); vNPU's npu kernels are always
    Inductor's C++ kernels, queued on npu streams, so any other name compiles
    as "default" does, with one warning per name."""
    from torch._inductor import codecache

    from torch_npu._inductor.cache_key import name_npu_in_cache_keys
    from torch_npu.utils import _dynamo

    backend = os.environ.get("TORCHINDUCTOR_NPU_BACKEND", "default")
    if backend != "default" and backend not in _warned_backends:
        _warned_backends.add(backend)
        warnings.warn(f"torch_npu: npu_backend={backend!r} is compiled as 'default' on vNPU: npu kernels are "
                      f"generated by Inductor's C++ backend, whichever code generator the option names")
    codegen_classes()
    name_npu_in_cache_keys(codecache)  # cache keys name the npu and CANN
    _dynamo._InductorNpuRegistry._loaded_backend = backend


_load_backend()

from torch_npu._inductor.shape_handling import NPUShapeHandling, patch_shape_handling  # noqa: E402,F401
