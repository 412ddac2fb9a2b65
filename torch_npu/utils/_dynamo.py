"""Real torch_npu's module for Dynamo's device glue: registers npu's
DeviceInterface (torch_npu/utils/_dynamo_device.py) with Dynamo as soon as
Dynamo loads (and with Inductor's npu backend at the first compile,
torch_npu/_inductor/__init__.py), and teaches Dynamo npu's stream and event
classes, which its tables name for CUDA and XPU only."""

__all__ = []


def _register_dynamo_interface(device_interface_module):
    """Dynamo's device interface for npu, registered as soon as Dynamo loads
    it (torch_npu/__init__.py): Dynamo traces streams and events
    (``torch.npu.Stream()``, ``torch.npu.current_stream()``, ``with
    torch.npu.stream(s)``) through it with any backend, "aot_eager" as well
    as Inductor."""
    import torch
    from torch_npu.utils._dynamo_device import NpuInterface

    device_interface_module.register_interface_for_device("npu", NpuInterface)
    for index in range(torch.npu.device_count()):
        device_interface_module.register_interface_for_device(f"npu:{index}", NpuInterface)


def _teach_dynamo_npu_streams(dynamo):
    """After ``torch._dynamo`` loads: Dynamo puts stream and event objects in
    the graph for the classes its ``_in_graph_classes`` lists and the
    current-stream functions its handler table names. Both list CUDA's and
    XPU's by name; npu's are added, so ``torch.npu.Stream()``,
    ``torch.npu.Event()`` and ``torch.npu.current_stream()`` trace as
    ``torch.cuda``'s do, instead of Dynamo stepping into their Python code
    (which calls into torch_npu._C and graph-breaks). ``with
    torch.npu.stream(s)`` is handled through the device interface above."""
    import torch
    from torch._dynamo.trace_rules import get_torch_obj_rule_map
    from torch._dynamo.variables.torch import TorchInGraphFunctionVariable
    from torch._dynamo.variables.user_defined import UserDefinedClassVariable

    # Both are cached functions returning the table they build once: adding
    # to the table is what every later lookup sees.
    UserDefinedClassVariable._in_graph_classes().update({torch.npu.Stream, torch.npu.Event})
    handlers = TorchInGraphFunctionVariable._get_handlers()
    generic = handlers.get(torch.accelerator.current_stream)
    if generic is not None:  # device-agnostic: the stream state of the device it is asked for
        handlers.setdefault(torch.npu.current_stream, generic)
    # The calls are put in the graph rather than stepped into (``torch.npu.stream``
    # has the device interface's handler, a stream context in the graph).
    rules = get_torch_obj_rule_map()
    for fn in (torch.npu.current_stream, torch.npu.stream):
        if fn in handlers:
            rules.setdefault(fn, TorchInGraphFunctionVariable)
    _fold_npu_device_queries(rules, TorchInGraphFunctionVariable)
    _teach_dynamo_npu_autocast()


def _teach_dynamo_npu_autocast():
    """``with torch.npu.amp.autocast(...)`` in traced code becomes the graph's
    autocast region, as ``torch.cuda.amp.autocast`` does: Dynamo knows the
    CUDA and CPU classes by name and would otherwise step into the npu one's
    constructor (torch_npu's Python over its C extension) and break the
    graph. Its arguments are bound by its own signature (enabled, dtype,
    cache_enabled) and handed on as ``torch.amp.autocast("npu", ...)``. An
    instance made outside (the decorator form) is an ``autocast`` object,
    which Dynamo already reads by its attributes."""
    import inspect

    import torch
    from torch._dynamo.variables import torch as torch_variables
    from torch._dynamo.variables.base import VariableTracker
    from torch._dynamo.variables.constant import ConstantVariable
    from torch._dynamo.variables.ctx_manager import AutocastModeVariable

    npu_autocast = torch.npu.amp.autocast
    manager_class = torch_variables.TorchCtxManagerClassVariable
    if npu_autocast in torch_variables.supported_ctx_manager_classes:
        return
    torch_variables.supported_ctx_manager_classes[npu_autocast] = None
    original_call = manager_class.call_function

    def call_function(self, tx, args, kwargs):
        if self.value is not npu_autocast:
            return original_call(self, tx, args, kwargs)
        bound = inspect.signature(npu_autocast).bind(*args, **kwargs)
        bound.apply_defaults()
        # A default is a Python value, an argument the tracer's variable.
        arguments = {key: value if isinstance(value, VariableTracker) else ConstantVariable.create(value)
                     for key, value in bound.arguments.items()}
        return AutocastModeVariable.create(torch.amp.autocast_mode.autocast, [ConstantVariable.create("npu")],
                                           arguments)

    manager_class.call_function = call_function


def _fold_npu_device_queries(rules, in_graph):
    """``torch.npu.current_device()`` and friends fold to constants in traced
    code, as ``torch.cuda``'s do: the current device (and whether npu is
    initialized) under a guard that recompiles when it changes; availability,
    the device count and a device's properties as plain constants. Without
    this Dynamo refuses to step into them (they are torch_npu's Python over
    its C extension) and breaks the graph."""
    import torch
    from torch._dynamo.variables import torch as torch_variables

    guarded = (torch.npu.current_device, torch.npu.is_initialized)
    plain = (torch.npu.is_available, torch.npu.device_count, torch.npu.get_device_properties,
             torch.npu.get_device_name)
    for fn in guarded:
        torch_variables.constant_fold_functions_need_guards.setdefault(fn)
    for fn in guarded + plain:
        torch_variables.constant_fold_functions.setdefault(fn)
        rules.setdefault(fn, in_graph)


def _dynamo_register_interface_for_device():
    from torch_npu._inductor import codegen_classes
    codegen_classes()  # registers the interface, the backend and the op overrides once
