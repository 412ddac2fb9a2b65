"""NPU graphs: capture the work launched on a stream once, replay it for a
fraction of eager's host cost (torch.npu.NPUGraph, torch.npu.graph,
torch.npu.make_graphed_callables), with CUDA graphs' semantics.

A capture records the tasks launched on the capturing stream instead of
running them, and takes their memory from a private pool; a replay launches
all of them as one task on the current stream, on the addresses of capture
time. Refill static inputs in place before a replay, read static outputs
after it. What cannot be captured raises "operation not permitted when
stream is capturing": synchronizing ops (.item(), printing, data-dependent
shapes), copies between host and device, CPU fallbacks, host waits on events
of the capture. Random ops are captured: each replay draws fresh numbers
from the generators' state at that replay, as eager would. A capture forks
onto a stream that waits for one of its events and must join it back
(capture_stream.wait_stream(side)) before it ends. See docs/graph_mode.md.
"""

import gc
import threading
import typing

import torch
import torch.utils._pytree as pytree

import torch_npu._C as _C
from torch_npu.npu._graph_tensor_dump import (  # noqa: F401
    _NPUGRAPH_TENSOR_BUFFER_SPEC_MARKER, _NPUGRAPH_TENSOR_PTR_SPEC_MARKER, _build_save_npugraph_tensor_path,
    _make_npugraph_tensor_ptr_spec, _materialize_npugraph_tensor_arg, print_npugraph_tensor, save_npugraph_tensor)

__all__ = [
    "NPUGraph",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "make_graphed_callables",
    "graph_task_group_begin",
    "graph_task_group_end",
    "graph_task_update_begin",
    "graph_task_update_end",
    "super_kernel_scope_begin",
    "super_kernel_scope_end",
]


def is_current_stream_capturing():
    """True when NPU graph capture is underway on the current stream."""
    return _C._npu_isCurrentStreamCapturing()


def graph_pool_handle():
    """An opaque token naming a memory pool that several graphs' captures may share."""
    return _C._graph_pool_handle()


def graph_task_group_begin(stream):
    """Opens a task group in the graph ``stream`` is capturing: the work
    captured until ``graph_task_group_end`` can later be re-recorded with new
    arguments by ``graph_task_update_begin``/``graph_task_update_end``."""
    _C._graph_task_group_begin(stream)


def graph_task_group_end(stream):
    """Closes the open task group of ``stream``'s capture; returns its handle
    (a ``torch_npu._C._NPUTaskGroupHandle``)."""
    return _C._graph_task_group_end(stream)


def graph_task_update_begin(stream, handle):
    """From now on, the work launched on ``stream`` (not capturing) is
    recorded as the new work of task group ``handle`` instead of running."""
    _C._graph_task_update_begin(stream, handle)


def graph_task_update_end(stream):
    """Ends ``stream``'s task update; the group's new work takes effect when
    ``stream`` reaches this point (record an event after it for replays to
    wait for)."""
    _C._graph_task_update_end(stream)


def _npu_fused_infer_attention_score_out_graph(stream, handle, event, query, key, value, *args, out, **kwargs):
    """Task update of a captured npu_fused_infer_attention_score.out in one
    call (torch_npu._C's binding of that name): on ``stream``, the operator
    with the new arguments becomes task group ``handle``'s work, then
    ``event``, which the replay waits for, is recorded. Returns ``out``'s
    (attention_out, softmax_lse)."""
    import torch_npu
    graph_task_update_begin(stream, handle)
    try:
        torch_npu.npu_fused_infer_attention_score.out(query, key, value, *args, out=out, **kwargs)
    finally:
        graph_task_update_end(stream)
    event.record(stream)
    return tuple(out)


_C._npu_fused_infer_attention_score_out_graph = _npu_fused_infer_attention_score_out_graph


class _GraphDispatchRecord:
    """One call captured by an automatic capture: the task group it was
    captured in, the event its replay waits for, and its arguments (npu
    tensors as non-owning views), for updates to re-record it."""

    def __init__(self, event, handle, func, args, kwargs):
        self.event = event
        self.handle = handle
        self.op_cache_entry = func
        self.args = args
        self.kwargs = kwargs


class _GraphDispatchMode(torch.overrides.TorchFunctionMode):
    """NPUGraph's automatic capture (``torch.npu.graph(g, auto_dispatch_capture=True)``).

    Each call of an operator with a handler (torch_npu/npu/_npugraph_handlers)
    is captured behind an ExternalEvent wait, in a task group of its own, and
    recorded; ``update_capture_record`` re-records the calls with new host
    arguments on the update stream (one per process, as real torch_npu's),
    recording each event after its update. Real torch_npu intercepts the
    operators with a TorchDispatchMode; vNPU's fused operators are
    compositions whose dispatcher calls are their ATen parts, so the calls
    are intercepted where the user makes them, with a TorchFunctionMode.
    """

    update_stream = None

    def __init__(self):
        super().__init__()
        if _GraphDispatchMode.update_stream is None:
            _GraphDispatchMode.update_stream = torch.npu.Stream()
        self.update_stream = _GraphDispatchMode.update_stream
        self.graph_dispatch_records = []
        # Recorded on the update stream after the latest update; the next
        # replay waits for it (NPUGraph.replay).
        self.latest_update = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        from torch_npu.npu._npugraph_handlers.npugraph_handler import _NPU_GRAPH_OP_HANDLERS
        kwargs = kwargs or {}
        handler = _NPU_GRAPH_OP_HANDLERS.get(getattr(func, "__name__", None))
        if handler is None or (hasattr(handler, "should_handle") and not handler.should_handle(func, args, kwargs)):
            return func(*args, **kwargs)
        stream = torch.npu.current_stream()
        event = torch.npu.ExternalEvent()
        # Set once outside the capture, so a replay before any update runs the
        # capture-time arguments (on the device it would wait forever).
        event.record(torch.npu.default_stream(stream.device))
        event.wait(stream)
        event.reset(stream)
        func, args, kwargs = handler.prepare_capture(func, args, kwargs)
        graph_task_group_begin(stream)
        result = func(*args, **kwargs)
        handle = graph_task_group_end(stream)
        self.graph_dispatch_records.append(self._record(event, handle, func, args, kwargs, handler))
        return handler.postprocess_result(result, kwargs)

    @staticmethod
    def _record(event, handle, func, args, kwargs, handler):
        import copy

        def npu(value):
            return isinstance(value, torch.Tensor) and value.device.type == "npu"
        recorded_args = [_C._weak_ref_tensor(a) if npu(a) else copy.deepcopy(a) for a in args]
        # The schema's tensor arguments (an overload packet's: its default
        # overload's); without a schema, every tensor passed by keyword.
        schema = getattr(func, "_schema", None) or getattr(getattr(func, "default", None), "_schema", None)
        if schema is not None:
            tensor_names = [a.name for a in schema.arguments
                            if a.type.isSubtypeOf(torch._C.OptionalType.ofTensor())]
        else:
            tensor_names = [k for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
        recorded_kwargs = {k: handler.record_wrap_kwarg(k, v, tensor_names) for k, v in kwargs.items()}
        return _GraphDispatchRecord(event, handle, func, recorded_args, recorded_kwargs)

    def update_capture_record(self, cpu_update_input):
        from torch_npu.npu._npugraph_handlers.npugraph_handler import _NPU_GRAPH_OP_HANDLERS
        from torch_npu.utils._error_code import ErrCode, pta_error
        records = self.graph_dispatch_records
        if not isinstance(cpu_update_input, (list, tuple)) or not all(isinstance(u, dict) for u in cpu_update_input):
            raise TypeError("NPUGraph.update: cpu_update_input should be a list of dicts (one per captured "
                            "operator, or one for all)")
        if len(cpu_update_input) == 1:
            cpu_update_input = [dict(cpu_update_input[0]) for _ in records]
        if len(cpu_update_input) != len(records):
            raise RuntimeError(f"Currently, there are {len(records)} operators that need to be updated by capture, "
                               f"and there are only {len(cpu_update_input)} elements in the incoming "
                               f"cpu_update_input list" + pta_error(ErrCode.PARAM))
        with torch.npu.stream(self.update_stream):
            for record, update in zip(records, cpu_update_input):
                handler = _NPU_GRAPH_OP_HANDLERS.get(record.op_cache_entry.__name__)
                if handler is None:
                    raise RuntimeError(f"No handler for recorded op: {record.op_cache_entry.__name__}: it was "
                                       f"unregistered after the capture." + pta_error(ErrCode.PARAM))
                graph_task_update_begin(self.update_stream, record.handle)
                try:
                    for key, value in update.items():
                        if key in record.kwargs:
                            record.kwargs[key] = value
                    handler.update_args(record, update)
                    record.op_cache_entry(*record.args, **record.kwargs)
                finally:
                    graph_task_update_end(self.update_stream)
                record.event.record(self.update_stream)
            self.latest_update = torch.npu.Event()
            self.latest_update.record(self.update_stream)


# The NPUGraph capturing each stream, by (device, stream id).
_CAPTURING = {}


def _stream_key(stream):
    return stream.device_index, stream.stream_id


class NPUGraph(_C._NPUGraph):
    """An NPU graph: ``capture_begin``/``capture_end`` (or ``torch.npu.graph``)
    record, ``replay`` re-launches, ``reset`` frees the graph and its pool."""

    # keep_graph is torch.cuda.CUDAGraph's (capture now, instantiate later);
    # real torch_npu's NPUGraph() takes no argument, so it is keyword-only here.
    def __new__(cls, *, keep_graph=False):
        return super().__new__(cls)

    def __init__(self, *, keep_graph=False):
        super().__init__()
        self._keep_graph = keep_graph
        self.graph_dispatch_mode = _GraphDispatchMode()
        self.auto_dispatch_capture = False

    def update(self, cpu_update_input):
        """Re-records the operators an automatic capture (``torch.npu.graph(g,
        auto_dispatch_capture=True)``) captured, with the host arguments in
        ``cpu_update_input``: one dict per captured operator (or one for all),
        e.g. ``[{"actual_seq_lengths": [100]}]``. Queued on the update stream;
        the next replay waits for it."""
        from torch_npu.utils._error_code import ErrCode, pta_error
        if not self.auto_dispatch_capture:
            raise RuntimeError("The current graph configuration does not support update, Try to capture by setting "
                               "auto_dispatch_capture=True during capture" + pta_error(ErrCode.PARAM))
        self.graph_dispatch_mode.update_capture_record(cpu_update_input)

    def replay(self):
        """Launches the captured work on the current stream. After an
        ``update``, the replay first waits for that update: the record's
        event alone, which the capture set once so that a replay before any
        update runs, could let a replay pass on that stale setting while the
        update it follows is still queued."""
        latest, self.graph_dispatch_mode.latest_update = self.graph_dispatch_mode.latest_update, None
        if latest is not None:
            torch.npu.current_stream().wait_event(latest)
        super().replay()

    def capture_begin(self, pool=None, capture_error_mode="global"):
        """Begins capturing the current stream's work (prefer ``torch.npu.graph``).
        ``pool`` (0, 0) names no pool, as c10's null MempoolId does for CUDA
        graphs: the capture gets a private pool of its own."""
        if pool is not None and tuple(pool) == (0, 0):
            pool = None
        super().capture_begin(pool=pool, capture_error_mode=capture_error_mode)
        self._capture_stream = _stream_key(torch.npu.current_stream())
        _CAPTURING[self._capture_stream] = self

    def capture_end(self):
        """Ends the capture begun by ``capture_begin``."""
        _CAPTURING.pop(getattr(self, "_capture_stream", None), None)
        super().capture_end()

    @staticmethod
    def get_currently_capturing_graph():
        """The NPUGraph capturing the current stream (torch_npu's API; its
        conditional nodes use it)."""
        from torch_npu.utils._error_code import ErrCode, pta_error
        if not torch.npu.is_current_stream_capturing():
            raise RuntimeError("The current NPU stream is not currently capturing." + pta_error(ErrCode.PARAM))
        graph = _CAPTURING.get(_stream_key(torch.npu.current_stream()))
        if graph is not None:
            return graph
        if not _CAPTURING:  # the capture is torch.accelerator.Graph's, which has no NPUGraph object
            raise RuntimeError("torch.npu.NPUGraph.get_currently_capturing_graph() is not supported during "
                               "torch.accelerator.Graph capture." + pta_error(ErrCode.NOT_SUPPORT))
        raise RuntimeError("get_currently_capturing_graph() can be used only between capture_begin() and "
                           "capture_end(). Did you use a stream without making it depend upon the original stream "
                           "used for capture?" + pta_error(ErrCode.PARAM))

    def instantiate(self):
        """Makes a ``keep_graph=True`` capture replayable; captures are always ready here."""
        if self._num_tasks() == 0 and not self._keep_graph:
            raise RuntimeError("Called NPUGraph::instantiate without a preceding successful capture.")

    def reset(self):
        """Deletes the captured graph (after its queued replays) and releases its pool."""
        if _CAPTURING.get(getattr(self, "_capture_stream", None)) is self:  # abandoned mid-capture
            del _CAPTURING[self._capture_stream]
        super().reset()

    def pool(self):
        """The id of this graph's memory pool, to share with another capture."""
        return super().pool()

    def enable_debug_mode(self):
        """Accepted for torch.cuda.CUDAGraph's API: the captured task list is
        always kept, so ``debug_dump`` needs nothing turned on."""

    def debug_dump(self, debug_path):
        """Writes the captured tasks, in replay order, as JSON."""
        import json

        with open(debug_path, "w") as f:
            json.dump({"tasks": self._task_names()}, f, indent=1)

    def raw_npu_graph(self):
        raise NotImplementedError("NPUGraph.raw_npu_graph: the virtual NPU has no aclmdlRI handle to return")

    def register_generator_state(self, generator):
        """Registers an npu generator whose random ops this graph captures
        (torch.cuda.CUDAGraph's API). vNPU already tracks every generator a
        capture draws from, so registering only checks it is an npu one."""
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"register_generator_state expects a torch.Generator, got {type(generator).__name__}")
        if generator.device.type != "npu":
            raise ValueError(f"register_generator_state expects an npu generator, got one on {generator.device}")

    def super_kernel_optimize(self, optimize_options=None, debug_options=None):
        """Fuses the captured kernels into super kernels on the device (CANN's
        graph optimisation, to cut per-kernel launch cost). The options are
        checked as real torch_npu checks them; there is nothing to fuse here:
        a replay already runs every captured kernel in one task."""
        _check_super_kernel_options("optimize_options", optimize_options, _SUPER_KERNEL_OPTIMIZE_OPTIONS)
        _check_super_kernel_options("debug_options", debug_options, _SUPER_KERNEL_DEBUG_OPTIONS)


# super_kernel_optimize's options and the type of each value.
_SUPER_KERNEL_OPTIMIZE_OPTIONS = {
    "preload_code": int, "split_mode": int, "stream_fusion": int, "constant_codegen": int,
    "auto_op_parallel": int, "opt_extend": str, "dcci_before_kernel_start": list,
    "dcci_after_kernel_end": list, "dcci_disable_on_kernel": list, "aggressive_opt_strategies": dict,
}
_SUPER_KERNEL_AGGRESSIVE_OPTIONS = {"event_breaker_bypass": int, "value_breaker_bypass": int,
                                    "task_breaker_bypass": int}
_SUPER_KERNEL_DEBUG_OPTIONS = {"debug_sync_all": int, "debug_op_exec_trace": int,
                               "debug_cross_core_sync_check": int, "debug_extend": str}


def _check_super_kernel_options(name, options, valid):
    from torch_npu.utils._error_code import ErrCode, pta_error
    if options is None:
        return
    if not isinstance(options, dict):
        raise RuntimeError(f"{name} param must be dict or None." + pta_error(ErrCode.PARAM))
    for key, value in options.items():
        if key not in valid:
            raise RuntimeError(f"{name} has no option {key!r}; valid options: {', '.join(valid)}."
                               + pta_error(ErrCode.PARAM))
        kind = valid[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise RuntimeError(f"{name}[{key!r}] should be a {kind.__name__}, got {type(value).__name__}."
                               + pta_error(ErrCode.PARAM))
        if kind is list and not all(isinstance(v, str) for v in value):
            raise RuntimeError(f"{name}[{key!r}] should be a list of kernel names (str)." + pta_error(ErrCode.PARAM))
        if key == "aggressive_opt_strategies":
            _check_super_kernel_options(f"{name}[{key!r}]", value, _SUPER_KERNEL_AGGRESSIVE_OPTIONS)


_super_kernel_scopes = threading.local()


def _check_scope_name(scope_name):
    from torch_npu.utils._error_code import ErrCode, pta_error
    if scope_name is not None and (not isinstance(scope_name, str) or not scope_name.strip()):
        raise RuntimeError("scope_name should be None or a non-empty string." + pta_error(ErrCode.PARAM))


def super_kernel_scope_begin(scope_name=None):
    """Opens a super-kernel scope: on the device, the kernels captured inside
    are fused into one. Scopes nest and must be closed in order; a replay
    here already runs all captured kernels in one task, so the scope only
    marks the region."""
    _check_scope_name(scope_name)
    stack = _super_kernel_scopes.__dict__.setdefault("stack", [])
    stack.append(scope_name)


def super_kernel_scope_end(scope_name=None):
    """Closes the innermost super-kernel scope (the one ``scope_name`` opened)."""
    from torch_npu.utils._error_code import ErrCode, pta_error
    _check_scope_name(scope_name)
    stack = _super_kernel_scopes.__dict__.setdefault("stack", [])
    if not stack:
        raise RuntimeError("super_kernel_scope_end without a matching super_kernel_scope_begin."
                           + pta_error(ErrCode.PARAM))
    if stack[-1] != scope_name:
        raise RuntimeError(f"super_kernel_scope_end({scope_name!r}) does not close the innermost scope, "
                           f"{stack[-1]!r}." + pta_error(ErrCode.PARAM))
    stack.pop()


class graph:
    """``with torch.npu.graph(g):`` captures the block's NPU work into ``g``.

    Synchronizes the device and empties the cache first, then captures on
    ``stream`` (default: a side stream shared by all captures) into ``pool``
    (default: the graph's own).
    """

    default_capture_stream: typing.Optional["torch.npu.Stream"] = None

    def __init__(self, npu_graph, pool=None, stream=None, auto_dispatch_capture=False,
                 capture_error_mode: str = "global"):
        if self.__class__.default_capture_stream is None:
            self.__class__.default_capture_stream = torch.npu.Stream()
        self.pool = () if pool is None else (pool,)
        self.capture_stream = stream if stream is not None else self.__class__.default_capture_stream
        self.stream_ctx = torch.npu.stream(self.capture_stream)
        self.npu_graph = npu_graph
        self.capture_error_mode = capture_error_mode
        self.auto_dispatch_capture = bool(auto_dispatch_capture)
        npu_graph.auto_dispatch_capture = self.auto_dispatch_capture

    def __enter__(self):
        torch.npu.synchronize()
        gc.collect()
        torch.npu.empty_cache()
        self.stream_ctx.__enter__()
        try:
            self.npu_graph.capture_begin(*self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)
            raise
        if self.auto_dispatch_capture:
            self.npu_graph.graph_dispatch_mode.__enter__()

    def __exit__(self, exc_type, exc_value, traceback):
        try:
            if self.auto_dispatch_capture:
                self.npu_graph.graph_dispatch_mode.__exit__(exc_type, exc_value, traceback)
            if exc_type is None:
                self.npu_graph.capture_end()
            else:
                # The capture failed: drop it, so the original error is what the user sees.
                self.npu_graph.reset()
        finally:
            self.stream_ctx.__exit__(exc_type, exc_value, traceback)


def make_graphed_callables(callables, sample_args, num_warmup_iters=3, allow_unused_input=False, pool=None):
    """Graphed versions of callables (functions or modules): each call replays
    a captured forward graph inside one autograd node whose backward replays a
    captured backward graph. Several callables share one memory pool and must
    run in the order given. Inputs' shapes, dtypes and requires_grad must
    match ``sample_args``; modules must have no hooks."""
    if torch.is_autocast_enabled() and torch.is_autocast_cache_enabled():
        raise RuntimeError("make_graphed_callables does not support the autocast caching. Please set "
                           "`cache_enabled=False`.")
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables = (callables,)
        sample_args = (sample_args,)

    flat_args, static_inputs = [], []
    for c, args in zip(callables, sample_args):
        if isinstance(c, torch.nn.Module):
            if c._backward_hooks or c._forward_hooks or c._forward_pre_hooks:
                raise RuntimeError("Modules must not have hooks registered at the time they are passed. "
                                   "However, registering hooks on modules after passing them through "
                                   "make_graphed_callables is allowed.")
            if any(b.requires_grad for b in c.buffers()):
                raise RuntimeError("In any :class:`~torch.nn.Module` passed to make_graphed_callables, only "
                                   "parameters may be trainable. All buffers must have requires_grad=False.")
        leaves, _ = pytree.tree_flatten(args)
        if not all(isinstance(a, torch.Tensor) for a in leaves):
            raise TypeError("In the beta API, sample_args for each callable must contain only Tensors. "
                            "Other types are not allowed.")
        flat_args.append(tuple(leaves))
        params = tuple(c.parameters()) if isinstance(c, torch.nn.Module) else ()
        static_inputs.append(tuple(leaves) + params)

    mempool = graph_pool_handle() if pool is None else pool
    fwd_graphs = [NPUGraph() for _ in callables]
    bwd_graphs = [NPUGraph() for _ in callables]

    def needs_grad(tensors):
        return tuple(t for t in tensors if t.requires_grad)

    # Warm up on a side stream (first launches validate their arguments,
    # lazy state gets built), so the captures record steady-state work.
    torch.npu.synchronize()
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    def warm_up(c, args, inputs):
        # Nothing of the warm-up's autograd graph may outlive this call: its
        # AccumulateGrad nodes would remember the side stream, and the
        # captured backward would then have to synchronize with it.
        outputs = [o for o in pytree.tree_leaves(c(*args)) if isinstance(o, torch.Tensor) and o.requires_grad]
        if outputs and needs_grad(inputs):
            torch.autograd.grad(outputs, needs_grad(inputs), grad_outputs=tuple(torch.empty_like(o) for o in outputs),
                                only_inputs=True, allow_unused=allow_unused_input)

    with torch.npu.stream(side):
        for c, args, inputs in zip(callables, sample_args, static_inputs):
            for _ in range(num_warmup_iters):
                warm_up(c, args, inputs)
    torch.npu.current_stream().wait_stream(side)
    torch.npu.synchronize()

    # Forward graphs in order, then backward graphs in reverse order, all in one pool.
    static_outputs_all, output_specs = [], []
    for c, args, fwd_graph in zip(callables, sample_args, fwd_graphs):
        with graph(fwd_graph, pool=mempool):
            outputs = c(*args)
        flat_outputs, spec = pytree.tree_flatten(outputs)
        static_outputs_all.append(tuple(flat_outputs))
        output_specs.append(spec)

    static_grad_outputs_all, static_grad_inputs_all = [], []
    for static_inputs_c, static_outputs, bwd_graph in zip(reversed(static_inputs), reversed(static_outputs_all),
                                                           reversed(bwd_graphs)):
        static_grad_outputs = tuple(torch.empty_like(o) if isinstance(o, torch.Tensor) and o.requires_grad
                                    else None for o in static_outputs)
        outputs_needing = tuple(o for o in static_outputs if isinstance(o, torch.Tensor) and o.requires_grad)
        inputs_needing = needs_grad(static_inputs_c)
        grads = ()
        if outputs_needing and inputs_needing:
            with graph(bwd_graph, pool=mempool):
                grads = torch.autograd.grad(outputs_needing, inputs_needing,
                                            grad_outputs=tuple(g for g in static_grad_outputs if g is not None),
                                            only_inputs=True, allow_unused=allow_unused_input)
        grads = iter(grads)
        static_grad_inputs = tuple(next(grads) if t.requires_grad else None for t in static_inputs_c)
        static_grad_outputs_all.append(static_grad_outputs)
        static_grad_inputs_all.append(static_grad_inputs)
    static_grad_outputs_all.reverse()
    static_grad_inputs_all.reverse()
    # Free the captured autograd graphs (the replays need only the storage):
    # their AccumulateGrad nodes would otherwise outlive the capture and ask
    # every eager backward to synchronize with the capture stream.
    static_outputs_all = [tuple(o.detach() if isinstance(o, torch.Tensor) else o for o in outs)
                          for outs in static_outputs_all]
    del outputs, grads

    def make_graphed_autograd_function(fwd_graph, bwd_graph, num_user_args, static_inputs_c, static_outputs,
                                       static_grad_outputs, static_grad_inputs, spec):
        class Graphed(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *inputs):
                for i in range(num_user_args):
                    if static_inputs_c[i].data_ptr() != inputs[i].data_ptr():
                        static_inputs_c[i].copy_(inputs[i])
                fwd_graph.replay()
                return tuple(o.detach() for o in static_outputs)

            @staticmethod
            @torch.autograd.function.once_differentiable
            def backward(ctx, *grads):
                for g, static_g in zip(grads, static_grad_outputs):
                    if static_g is not None and g is not None and g.data_ptr() != static_g.data_ptr():
                        static_g.copy_(g)
                bwd_graph.replay()
                return tuple(b.detach() if b is not None else None for b in static_grad_inputs)

        def functionalized(*user_args):
            flat, _ = pytree.tree_flatten(user_args)
            outputs = Graphed.apply(*(tuple(flat) + tuple(static_inputs_c[num_user_args:])))
            return pytree.tree_unflatten(list(outputs), spec)

        return functionalized

    graphed = []
    for i, c in enumerate(callables):
        fn = make_graphed_autograd_function(fwd_graphs[i], bwd_graphs[i], len(flat_args[i]), static_inputs[i],
                                            static_outputs_all[i], static_grad_outputs_all[i],
                                            static_grad_inputs_all[i], output_specs[i])
        if isinstance(c, torch.nn.Module):
            def forward_for(module, graphed_fn, eager_forward, training_at_capture):
                def forward(*args, **kwargs):
                    # The graphs were captured in one training mode; the other runs eagerly.
                    if module.training == training_at_capture:
                        return graphed_fn(*args, **kwargs)
                    return eager_forward(*args, **kwargs)
                return forward

            c.forward = forward_for(c, fn, c.forward, c.training)
            graphed.append(c)
        else:
            graphed.append(fn)
    return graphed[0] if just_one else tuple(graphed)
