"""Dynamo's tables taught npu's streams, events, autocast and device queries
(part of the Dynamo setup, torch_npu/utils/_dynamo.py): Dynamo names CUDA's
and XPU's classes and functions in them, and would otherwise step into
torch_npu's Python over its C extension and break the graph."""

__all__ = []


def teach_dynamo_npu():
    _teach_dynamo_npu_streams()
    _put_npu_stream_switches_in_the_graph()
    _teach_dynamo_npu_autocast()
    _keep_npu_stream_and_event_types()


def _teach_dynamo_npu_streams():
    """Dynamo puts stream and event objects in
    the graph for the classes its ``_in_graph_classes`` lists and the
    current-stream functions its handler table names. Both list CUDA's and
    XPU's by name; npu's are added, so ``torch.npu.Stream()``,
    ``torch.npu.Event()`` and ``torch.npu.current_stream()`` trace as
    ``torch.cuda``'s do, instead of Dynamo stepping into their Python code
    (which calls into torch_npu._C and graph-breaks). ``with
    torch.npu.stream(s)`` is handled through npu's device interface, and the
    calls are put in the graph by npu's trace rules (torch_npu/dynamo/trace_rule.py)."""
    import torch
    from torch._dynamo.variables.torch import TorchInGraphFunctionVariable
    from torch._dynamo.variables.user_defined import UserDefinedClassVariable

    # Both are cached functions returning the table they build once: adding
    # to the table is what every later lookup sees.
    UserDefinedClassVariable._in_graph_classes().update({torch.npu.Stream, torch.npu.Event})
    handlers = TorchInGraphFunctionVariable._get_handlers()
    generic = handlers.get(torch.accelerator.current_stream)
    if generic is not None:  # device-agnostic: the stream state of the device it is asked for
        handlers.setdefault(torch.npu.current_stream, generic)


def _put_npu_stream_switches_in_the_graph():
    """``with torch.npu.stream(s)`` in traced code leaves in the graph, as real
    torch_npu's Dynamo patch does on torch 2.12 and later: a ``current_stream``
    node (the stream to come back to) where the context is made, a
    ``set_stream(s)`` node where it is entered and a ``set_stream`` back to
    the saved stream where it is left. torch's own stream context (kept
    underneath) annotates the nodes inside with their stream, which is what
    AOTAutograd and Inductor schedule by; the two switches are what a
    backend that runs the FX graph as it is (``eager``, a custom backend that
    returns ``gm``) needs to run the region on ``s``, and what backends that
    look for stream switches in the graph find."""
    from torch._dynamo.device_interface import get_interface_for_device
    from torch._dynamo.variables.builder import wrap_fx_proxy_cls
    from torch._dynamo.variables.streams import StreamContextVariable, StreamVariable
    from torch._dynamo.variables.torch import TorchInGraphFunctionVariable

    interface = get_interface_for_device("npu")

    class NpuStreamContextVariable(StreamContextVariable):
        def __init__(self, stream, saved_stream=None, **kwargs):
            self.saved_stream = saved_stream
            super().__init__(stream, **kwargs)

        def _switch_to(self, tx, stream):
            tx.output.create_proxy("call_function", interface.set_stream, (stream.as_proxy(),), {})

        def enter(self, tx, *args):
            self._switch_to(tx, self.get_stream())
            return super().enter(tx)

        def exit(self, tx, *args):
            self._switch_to(tx, self.saved_stream)
            return super().exit(tx, *args)

    def enter_npu_stream(self, tx, stream):
        saved = wrap_fx_proxy_cls(StreamVariable, tx,
                                  tx.output.create_proxy("call_function", interface.current_stream, (None,), {}))
        return NpuStreamContextVariable(stream, saved_stream=saved)

    TorchInGraphFunctionVariable._get_handlers()[interface.stream] = enter_npu_stream


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


def _keep_npu_stream_and_event_types():
    """A traced npu stream or event is of its own class (``torch.npu.Stream``,
    ``torch.npu.Event``), not of the generic ``torch.Stream`` / ``torch.Event``
    Dynamo reports: ``isinstance(e, torch.npu.Event)`` holds in traced code as
    it does eagerly, and methods that npu's classes define in Python (calling
    ``super(torch.npu.Event, self)``) trace as they run."""
    from torch._dynamo.variables import streams

    def python_type(self):
        return type(self.value)

    for variable in (streams.StreamVariable, streams.EventVariable):
        variable.python_type = python_type
