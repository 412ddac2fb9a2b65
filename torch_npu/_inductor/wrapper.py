"""The host-side wrapper Inductor generates for npu graphs.

PyTorch's Python wrapper, with one change: C++ kernels are bound by
``npu_cpp_pybinding`` (codecache.py), whose bindings queue the kernel on the
current npu stream instead of calling it. Allocations, extern kernels and
views are already npu eager code.
"""

import torch
from torch._inductor.codegen.common import DeviceOpOverrides
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen

_CPU_BINDING = "async_compile.cpp_pybinding("
_NPU_BINDING = "npu_cpp_pybinding("


class _NpuKernels:
    """What the npu wrappers (of a graph and of its subgraphs: torch.cond
    branches, while_loop bodies) write differently from the CPU's."""

    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
        # A fast path as the CPU's empty_strided_cpu, on the buffer's own device
        # (the generic path would allocate on the current device).
        if device.type != "npu" or torch._inductor.config.test_configs.track_memory_lifecycle:
            return super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
        shape_text = self.codegen_python_shape_tuple(shape)
        allocation_text = self.codegen_python_shape_tuple(shape if allocation_shape is None else allocation_shape)
        stride_text = self.codegen_python_shape_tuple(stride)
        index = -1 if device.index is None else device.index
        out = f"{name} = empty_strided_npu({allocation_text}, {stride_text}, {dtype}, {index})"
        if shape_text != allocation_text:
            out += f".as_strided({shape_text}, {stride_text})"
        return out

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
        # A C++ kernel is called through its binding, which queues it: the
        # same call line as on the CPU.
        if not triton:
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))
            return
        raise RuntimeError(f"npu graphs have no triton kernels (kernel {kernel_name})")

    def define_kernel(self, kernel_name, kernel_body, metadata=None, gpu=True, cpp_definition=None):
        if kernel_body.lstrip().startswith(_CPU_BINDING):
            kernel_body = kernel_body.replace(_CPU_BINDING, _NPU_BINDING, 1)
        return super().define_kernel(kernel_name, kernel_body, metadata, gpu, cpp_definition)

    # ACLGraph update plans (torch_npu/_inductor/_aclgraph_update_plan): each
    # extern kernel whose operator has an NpuGraph handler gets an entry, and
    # the plan is written as an attribute of the function an NPU graph
    # records: ``call``, or with graph partitions each partition's launcher
    # (``partition_N``). The branches of torch.cond write none.
    def generate_fallback_kernel(self, node) -> None:
        from torch_npu._inductor._aclgraph_update_plan import append_inductor_aclgraph_update_plan_for_codegen_node
        append_inductor_aclgraph_update_plan_for_codegen_node(self, node)
        super().generate_fallback_kernel(node)

    def generate_extern_kernel_alloc(self, extern_kernel, *args, **kwargs) -> None:
        from torch_npu._inductor._aclgraph_update_plan import append_inductor_aclgraph_update_plan_for_codegen_node
        append_inductor_aclgraph_update_plan_for_codegen_node(self, extern_kernel)
        super().generate_extern_kernel_alloc(extern_kernel, *args, **kwargs)


class NpuSubgraphWrapperCodegen(_NpuKernels, SubgraphPythonWrapperCodegen):
    """A subgraph's wrapper; it writes into its parent's module (and header)."""

    def generate_after_suffix(self, result) -> None:
        super().generate_after_suffix(result)
        if self.partition_signatures is not None:
            from torch_npu._inductor._aclgraph_update_plan import emit_inductor_aclgraph_update_plan_for_wrapper
            emit_inductor_aclgraph_update_plan_for_wrapper(self, result, is_graph_partition_subgraph=True)


class NpuPythonWrapperCodegen(_NpuKernels, PythonWrapperCodegen):
    subgraph_class = NpuSubgraphWrapperCodegen

    @classmethod
    def create(cls, is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return cls.subgraph_class(subgraph_name, parent_wrapper, partition_signatures)
        return cls()

    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline("from torch_npu._inductor.codecache import npu_cpp_pybinding")
        self.imports.writeline("from torch_npu._C import _empty_strided_npu as empty_strided_npu")

    def generate_after_suffix(self, result) -> None:
        from torch_npu._inductor._aclgraph_update_plan import emit_inductor_aclgraph_update_plan_for_wrapper
        super().generate_after_suffix(result)
        emit_inductor_aclgraph_update_plan_for_wrapper(self, result, is_graph_partition_subgraph=False)


class NpuCppWrapperUnsupported(CppWrapperCpu):
    """Inductor's C++ wrapper calls kernels from C++, outside stream order."""

    @staticmethod
    def create(*args, **kwargs):
        raise RuntimeError("torch._inductor.config.cpp_wrapper is not supported for npu graphs: the C++ wrapper "
                           "would call the kernels outside the npu stream order; use the default Python wrapper "
                           "(cpp_wrapper=False)")


class NpuDeviceOpOverrides(DeviceOpOverrides):
    """What the wrapper writes for npu device and stream handling."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"def {name}(index):\n    return torch.npu.current_stream(index).stream_id\n"

    def set_device(self, device_idx: int) -> str:
        return f"torch.npu.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.npu.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.npu.device({device_idx})"

    def current_stream(self) -> str:
        return "torch.npu.current_stream()"

    def cpp_kernel_type(self) -> str:
        return "void*"
