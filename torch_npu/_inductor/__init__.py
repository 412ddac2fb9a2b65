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

PyTorch finds this through the device module (``torch.npu.Scheduling``,
``torch.npu.PythonWrapperCodegen``, ``torch.npu.CppWrapperCodegen``, read by
Inductor's ``init_backend_registration``), so nothing here is imported
before the first compilation.
"""

_registered = False


def codegen_classes():
    """Registers npu with Dynamo (device interface) and Inductor (codegen),
    once; returns the classes the device module answers Inductor with."""
    from torch._inductor.codegen.cpp import CppScheduling

    from torch_npu._inductor.wrapper import NpuCppWrapperUnsupported, NpuPythonWrapperCodegen

    classes = {"Scheduling": CppScheduling, "PythonWrapperCodegen": NpuPythonWrapperCodegen,
               "CppWrapperCodegen": NpuCppWrapperUnsupported, "WrapperFxCodegen": None}
    global _registered
    if not _registered:
        _registered = True
        _register(classes)
    return classes


def _register(classes):
    import torch
    from torch._dynamo.device_interface import register_interface_for_device
    from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides

    from torch_npu._inductor.device_interface import NpuInterface
    from torch_npu._inductor.wrapper import NpuDeviceOpOverrides

    register_interface_for_device("npu", NpuInterface)
    for index in range(torch.npu.device_count()):
        register_interface_for_device(f"npu:{index}", NpuInterface)
    register_device_op_overrides("npu", NpuDeviceOpOverrides())
    register_backend_for_device("npu", classes["Scheduling"], classes["PythonWrapperCodegen"],
                                classes["CppWrapperCodegen"])
    _treat_npu_nodes_as_cpp_kernels()


def _treat_npu_nodes_as_cpp_kernels():
    """The scheduler guards the C++ backend's limits (no loop reordering, no
    reindexing for fusion) with ``BaseSchedulerNode.is_cpu()``. npu's kernels
    are that backend's, so the guards must hold for npu nodes too: the one
    place where Inductor itself is adjusted."""
    from torch._inductor import scheduler

    def is_cpu(self) -> bool:
        device = self.get_device()
        return device is not None and device.type in ("cpu", "npu")

    scheduler.BaseSchedulerNode.is_cpu = is_cpu
