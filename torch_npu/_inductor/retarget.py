"""npu graphs compiled for the CPU, run on npu streams.

Inductor's C++ backend is tuned and tested for CPU graphs: dozens of its
lowering and scheduling decisions read ``device.type == "cpu"`` (how a cat
is lowered, which reductions are reindexed, how random numbers are made).
Registered as a device of its own, npu would take the GPU-style branch of
each and hit code the C++ backend does not support. So a graph whose
tensors are all on one npu device is compiled *as a CPU graph*:

1. ``compile_fx`` (wrapped after torch._inductor.compile_fx is imported,
   torch_npu/utils/_dynamo.py; ``compile_npu_graph`` here) passes
   AOTAutograd an inner compiler that, for each forward and backward
   graph, rewrites its npu devices to cpu and its fake tensors to CPU twins
   with the same layouts (extern kernels still run on npu and produce those),
2. and compiles it with Inductor's CPU path, whose wrapper for this one
   compilation is ours (``NpuRetargetWrapperCodegen``): buffers come from
   the npu caching allocator on the graph's device, tensors the wrapper
   makes (``device(type='cpu')``) are made there too, and every C++ kernel
   is queued on the current npu stream by its binding (codecache.py).

The compiled code then runs on npu tensors exactly as the direct npu path
does (asynchronously, in stream order). Graphs that mix devices (a cpu
scalar input, two npu devices) and graphs with npu tensor constants take the direct path: npu as an Inductor
device (wrapper.py), which handles mixed devices but fewer patterns.

The FX graph cache keys these compilations apart from CPU ones (and per
npu device) through ``torch.compiler.config.cache_key_tag``. The AOTAutograd
cache keys the npu graph itself, which always takes the same path.
"""

import contextlib
import functools
import threading

import torch

_compiling = threading.local()  # .index: the npu device of the graph being compiled


def graph_device_index(inputs):
    """The npu device index when every tensor input is on that one npu device, else None."""
    index = None
    for t in inputs:
        if not isinstance(t, torch.Tensor):
            continue
        if t.device.type != "npu":
            return None
        device_index = t.device.index if t.device.index is not None else torch.npu.current_device()
        if index is not None and device_index != index:
            return None
        index = device_index
    return index


def _has_npu_constants(gm):
    """Tensor constants of the graph (``torch.tensor(...)`` in the code) stay
    npu tensors, which a CPU compilation cannot take: the direct path it is."""
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = gm
            for part in node.target.split("."):
                value = getattr(value, part, None)
            if isinstance(value, torch.Tensor) and value.device.type == "npu":
                return True
    return False


def _to_cpu_device(value):
    if isinstance(value, torch.device) and value.type == "npu":
        return torch.device("cpu")
    return value


def _cpu_twin(value, fake_mode):
    """A CPU fake tensor with the npu tensor's sizes, strides and dtype. The
    layouts stay the npu trace's: extern kernels (convolutions, matmuls) still
    run on npu at run time and produce exactly those."""
    if not isinstance(value, torch.Tensor) or value.device.type != "npu":
        return value
    with fake_mode:
        twin = torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device="cpu")
    return twin.requires_grad_(value.requires_grad) if value.is_leaf and value.requires_grad else twin


def _retarget_graph(gm, fake_mode):
    """npu devices in the nodes' arguments become cpu; so do the fake values,
    also in the subgraphs (the branches of torch.cond, the bodies of
    while_loop / invoke_subgraph), which Inductor compiles with the graph."""
    from torch.utils._pytree import tree_map
    for node in gm.graph.nodes:
        node.args = tree_map(_to_cpu_device, node.args)
        node.kwargs = tree_map(_to_cpu_device, node.kwargs)
        if "val" in node.meta:
            node.meta["val"] = tree_map(lambda v: _cpu_twin(v, fake_mode), node.meta["val"])
    for sub in gm.children():
        if isinstance(sub, torch.fx.GraphModule):
            _retarget_graph(sub, fake_mode)
    gm.recompile()


# Note [Stream operators flush the C++ kernels before them]
# The C++ backend keeps the kernels it generates in a group until the
# scheduler flushes it, which it does before an extern kernel that has a
# device. Stream and event operators in an npu graph (streams.record_event,
# wait_event, record_stream) are extern kernels without one: the scheduler
# wrote their call and freed the buffers whose last user was a kernel still
# held in the group, which then ran after the `del` of its own inputs
# ("cannot access local variable 'arg0_1'"). Triton emits each kernel at
# once, so CUDA graphs never see it; retargeted npu graphs flush first.
@functools.lru_cache(maxsize=None)
def _flush_before_deviceless_externs():
    from torch._inductor.scheduler import Scheduler

    original = Scheduler.codegen_extern_call

    @functools.wraps(original)
    def codegen_extern_call(self, scheduler_node):
        if compiling_device_index() is not None and scheduler_node.get_device() is None:
            self.flush()
        return original(self, scheduler_node)

    Scheduler.codegen_extern_call = codegen_extern_call


@contextlib.contextmanager
def _cpu_codegen_is_npus(index):
    from torch._inductor.codegen import common
    from torch_npu._inductor.wrapper import NpuCppWrapperUnsupported

    common.init_backend_registration()
    _flush_before_deviceless_externs()
    saved = common.device_codegens["cpu"]
    wrapper = _wrapper_classes()["NpuRetargetWrapperCodegen"]
    common.device_codegens["cpu"] = common.DeviceCodegen(saved.scheduling, wrapper, NpuCppWrapperUnsupported,
                                                         saved.fx_wrapper_codegen)
    previous = getattr(_compiling, "index", None)
    _compiling.index = index
    try:
        yield
    finally:
        common.device_codegens["cpu"] = saved
        _compiling.index = previous


def compiling_device_index():
    """The npu device of the graph compiling as a CPU graph on this thread, or None."""
    return getattr(_compiling, "index", None)


# The wrapper of a retargeted graph subclasses wrapper.py's npu wrappers,
# which subclass Inductor's: defining it imports Inductor's code generation,
# which a graph that takes the direct path (or fails before code generation)
# never needs. So the classes are made at the first retargeted compilation and then kept here as module attributes
# (``retarget.NpuRetargetWrapperCodegen``, through __getattr__), like any
# class of the module. Importing wrapper.py from here, and never the
# reverse, keeps the dependency one-way.
_WRAPPER_CLASS_NAMES = ("NpuRetargetWrapperCodegen", "NpuRetargetSubgraphWrapperCodegen")


@functools.lru_cache(maxsize=None)
def _wrapper_classes():
    from torch_npu._inductor.wrapper import NpuPythonWrapperCodegen, NpuSubgraphWrapperCodegen

    class _RetargetedAllocations:
        """In an npu graph compiled as a CPU graph, "cpu" buffers live on the graph's npu."""

        def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
            if device.type == "cpu":
                device = torch.device("npu", self.npu_index)
            return super().make_allocation(name, device, dtype, shape, stride, allocation_shape, False)

    class _RetargetedStreams:
        """User streams in an npu graph compiled as a CPU graph. Inductor names
        a graph's streams (``default_stream``, ``stream1`` ...) where it enters
        a device guard, which it writes for GPU devices only, yet it writes the
        ``with stream1:`` regions for any device. Each region here names its
        stream first: the caller's current stream for the default one (regions
        do not nest, so between them the current stream is the caller's), the
        user's stream object for the others. The kernels inside are queued on
        the stream current at their launch, so they run on the user's stream."""

        def codegen_cuda_stream_enter(self, stream_idx):
            from torch._inductor.virtualized import V

            if stream_idx == 0:
                self.writeline(f"default_stream = torch.npu.current_stream({self.npu_index})")
            else:
                index = V.graph.scheduler.stream_idx_to_user_obj_idx[stream_idx]
                self.imports.writeline("from torch._dynamo.graph_bytecode_inputs import get_external_object_by_index")
                self.writeline(f"stream{stream_idx} = get_external_object_by_index({index})")
            return super().codegen_cuda_stream_enter(stream_idx)

    class NpuRetargetSubgraphWrapperCodegen(_RetargetedAllocations, NpuSubgraphWrapperCodegen):
        def __init__(self, *args, **kwargs):
            self.npu_index = compiling_device_index()
            super().__init__(*args, **kwargs)

    class NpuRetargetWrapperCodegen(_RetargetedStreams, _RetargetedAllocations, NpuPythonWrapperCodegen):
        """The wrapper of an npu graph compiled as a CPU graph: its "cpu"
        buffers, and the tensors it makes on "cpu", live on the graph's npu."""

        subgraph_class = NpuRetargetSubgraphWrapperCodegen

        def __init__(self):
            self.npu_index = compiling_device_index()  # before the base class writes the header
            super().__init__()

        def write_header(self) -> None:
            super().write_header()
            index = self.npu_index
            self.imports.writeline("from torch_npu._inductor.retarget import retargeted_device")
            self.header.writeline(f"device = retargeted_device({index})")
            self.header.writeline(f"empty_strided_cpu = lambda size, stride, dtype: "
                                  f"empty_strided_npu(size, stride, dtype, {index})")

    classes = {"_RetargetedAllocations": _RetargetedAllocations, "_RetargetedStreams": _RetargetedStreams,
               "NpuRetargetSubgraphWrapperCodegen": NpuRetargetSubgraphWrapperCodegen,
               "NpuRetargetWrapperCodegen": NpuRetargetWrapperCodegen}
    for name, cls in classes.items():
        cls.__qualname__ = name  # found by pickle and repr as retarget.<name>
    globals().update(classes)
    return classes


def __getattr__(name):
    if name in _WRAPPER_CLASS_NAMES:
        return _wrapper_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Below this many elements an npu kernel runs on the stream worker alone, as
# eager npu kernels do (csrc/launch/launch.cpp, kSerialWorkElements: ATen's
# GRAIN_SIZE). A compiled kernel runs on the worker while the host threads go
# on issuing work; spread over every core, its OpenMP team competes with
# them, and its idle threads spin-wait after each parallel region. Measured
# on 2 cores (the bench_compile block, d=64): Inductor's own threshold (512
# elements per thread) made a training step 1.47 ms, this one 1.04-1.11 ms.
_SERIAL_WORK_ELEMENTS = 32768


def _npu_cpp_config():
    """Inductor's C++ settings for npu graphs, as eager npu kernels run
    (Note [Device threads beside the host] in runtime/include/vnpu/intra_op_threads.h):

    - ``cpp.threads``: one core fewer than the intra-op threads (``VNPU_HOST_CORES``
      where set, else ``torch.get_num_threads()``), left to the
      host thread that issues work meanwhile. (Eager kernels take every core
      while a host thread waits for the device; a compiled kernel's thread
      count is fixed when it is generated.)
    - ``cpp.min_chunk_size``: loops under _SERIAL_WORK_ELEMENTS run serially.
    """
    threads = torch._inductor.config.cpp.threads
    if threads <= 0:
        from torch_npu import _C  # VNPU_HOST_CORES, as eager kernels read it
        threads = max(1, _C._intra_op_max_threads() - 1)
    min_chunk = max(torch._inductor.config.cpp.min_chunk_size, -(-_SERIAL_WORK_ELEMENTS // threads))
    return {"cpp.threads": threads, "cpp.min_chunk_size": min_chunk}


# Note [Random numbers of compiled npu graphs are eager's]
# Real torch_npu keeps random operators out of Inductor's lowerings on the
# NPU (its lowering fallback list: rand, randn, bernoulli, native_dropout,
# rngprims.philox_rand, ...): a compiled graph calls the eager kernels, which
# draw from the device's generator, so a compiled model draws the numbers
# its eager run draws and advances the generator as eager does. vNPU does
# the same with Inductor's fallback_random for npu graphs (a CPU graph keeps
# Inductor's own random lowerings). A graph that saves and restores the
# generator's state (a checkpointed dropout, recomputed in the backward:
# run_and_save_rng_state / run_with_rng_state) is compiled on the direct
# path, npu as a device of its own: compiled for the CPU, those operators
# would be given the CPU generator's state (5056 bytes) instead of the npu's.
# rngprims.philox_rand (torch_npu/_philox_rand.py) is a random operator like
# the others: the graph calls its npu kernel. fallback_random does not reach
# it (Inductor lowers it whatever the config says, to its own CPU philox,
# which draws other numbers), so its lowering is swapped for a fallback
# while an npu graph compiles. Both hold for graphs compiled on the direct
# path too (npu constants, the generator's state saved, devices mixed:
# ``_drawing_as_eager``), forward and backward.
_NPU_RANDOM_CONFIG = {"fallback_random": True}


@contextlib.contextmanager
def _random_operators_fall_back():
    from torch._inductor import lowering

    ops = [op for op in (torch.ops.rngprims.philox_rand, torch.ops.rngprims.philox_rand.default)
           if op in lowering.lowerings]
    saved = {op: lowering.lowerings[op] for op in ops}
    for op in ops:
        lowering.lowerings[op] = lowering.fallback_handler(torch.ops.rngprims.philox_rand.default,
                                                           add_to_fallback_set=False)
    try:
        yield
    finally:
        lowering.lowerings.update(saved)


@contextlib.contextmanager
def _drawing_as_eager():
    """Note [Random numbers of compiled npu graphs are eager's], for a graph
    compiled on the direct path (npu as a device of its own)."""
    with _random_operators_fall_back(), torch._inductor.config.patch(**_NPU_RANDOM_CONFIG):
        yield


def _direct_inner(inner):
    """The inner compiler of a graph whose npu inputs are not all on one
    device (or that mixes in cpu ones): Inductor's, its random operators
    drawing as eager (forward and, compiled later, backward)."""
    @functools.wraps(inner)
    def compile_direct(gm, example_inputs, *args, **kwargs):
        with _drawing_as_eager():
            return inner(gm, example_inputs, *args, **kwargs)

    compile_direct._npu_retargeting = True  # passed through when compile_fx calls itself
    return compile_direct


def _saves_rng_state(gm):
    from torch._prims import rng_prims
    ops = {getattr(rng_prims, name, None) for name in
           ("run_and_save_rng_state", "run_with_rng_state", "graphsafe_run_with_rng_state")} - {None}
    return any(node.target in ops for node in gm.graph.nodes)


def _writing_update_plans(npu_graphs):
    """While a graph NpuGraphRunner will replay compiles, its wrapper writes
    an ACLGraph update plan (torch_npu/_inductor/_aclgraph_update_plan)."""
    if not npu_graphs:
        return contextlib.nullcontext()
    from torch_npu._inductor._aclgraph_update_plan.codegen import generating_for_npu_graphs
    return generating_for_npu_graphs()


@contextlib.contextmanager
def _updated_ints_named(gm, example_inputs, npu_graphs):
    """While ``gm`` compiles: the names of its integer inputs that it uses only
    as arguments an ACLGraph update plan replaces (``ints_only_updated``),
    for the NPU graphs of its partitions (graph_partition.py), whose inputs
    are a subset of the graph's, known by their placeholders' names. Found
    when first asked (only a partition with an update plan asks)."""
    @functools.lru_cache(None)
    def names():
        if not npu_graphs:
            return frozenset()
        from torch_npu._inductor.npugraph_runner import ints_only_updated

        placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        updated = ints_only_updated(gm, example_inputs)
        # A partition takes such an input by its symbol's name (s0), the graph by the placeholder's.
        return frozenset([placeholders[i] for i in updated] + [str(example_inputs[i].node.expr) for i in updated])

    previous = getattr(_compiling, "updated_int_names", None)
    _compiling.updated_int_names = names
    try:
        yield
    finally:
        _compiling.updated_int_names = previous


def updated_int_names():
    """The names ``_updated_ints_named`` gives for the graph compiling now."""
    names = getattr(_compiling, "updated_int_names", None)
    return frozenset() if names is None else names()


def _graphs_by_partition(compiled):
    """Whether Inductor's post-compile step took care of ``compiled``'s NPU
    graphs (its partitions recorded, or its reasons not to record them; set
    by graph_partition.py, which imports this module): it is left as it is."""
    return bool(getattr(compiled, "_npu_graphs_by_partition", False))


def _npu_graphs_of(compiled, gm, index, kwargs, example_inputs):
    """``compiled`` (boxed) replayed as NPU graphs, for mode="reduce-overhead":
    a function of the device's NPU graph tree (torch_npu/npu/_graph_tree.py),
    as Inductor's cudagraphify makes one of the CUDA graph tree; with
    ``torch._inductor.config.triton.cudagraph_trees`` off, a graph per input
    signature that returns copies (``NpuGraphRunner``)."""
    static = tuple(kwargs.get("static_input_idxs") or ())
    mutated = tuple(getattr(compiled, "mutated_input_idxs", ()) or ())
    is_backward = bool(kwargs.get("is_backward"))
    from torch_npu._inductor.npugraph_runner import NpuGraphRunner, _update_plan_of, ints_only_updated
    if not torch._inductor.config.triton.cudagraph_trees or _update_plan_of(compiled):
        # A graph whose captured operators are updated per call (an ACLGraph
        # update plan) replays through NpuGraphRunner, which applies the plan.
        return NpuGraphRunner(compiled, static, mutated, name="backward graph" if is_backward else "graph",
                              updated_ints=ints_only_updated(gm, example_inputs))
    from torch._inductor.cudagraph_utils import get_placeholder_info

    from torch_npu.npu._graph_tree import npugraphify_at_first_call

    return npugraphify_at_first_call(compiled, static, device_index=index, is_backward=is_backward,
                                     is_inference=bool(kwargs.get("is_inference")), stack_traces=None,
                                     placeholders=get_placeholder_info(gm.graph), mutated_input_idxs=mutated)


def _backward_beside_npu_graphs(compiled, index):
    """A backward compiled without NPU graphs whose forward replays them: tells
    the tree the pending backward ran (Note [Backward Generation Handling] in
    torch's cudagraph_trees), as Inductor's maybe_handle_backward_generation."""
    def run(new_inputs):
        from torch_npu.npu._graph_tree import get_manager

        manager = get_manager(index, create_if_none_exists=False)
        if manager is not None:
            manager.set_to_running_backward()
        return compiled(new_inputs)

    run._boxed_call = True
    return run


def _retargeting_inner(inner, index, npu_graphs=False):
    @functools.wraps(inner)
    def compile_for_cpu(gm, example_inputs, *args, **kwargs):
        # Inductor checks this option when it compiles each graph: a backward
        # compiled under it runs without NPU graphs beside a recorded forward.
        graphs_here = npu_graphs and not torch._inductor.config.force_disable_cudagraph_TESTING_ONLY
        if graph_device_index(example_inputs) != index or _has_npu_constants(gm) or _saves_rng_state(gm):
            with _drawing_as_eager():
                compiled = inner(gm, example_inputs, *args, **kwargs)
            if npu_graphs and kwargs.get("is_backward") and torch._inductor.config.triton.cudagraph_trees \
                    and not _graphs_by_partition(compiled):
                return _backward_beside_npu_graphs(compiled, index)
            return compiled
        from torch._guards import detect_fake_mode

        fake_mode = detect_fake_mode(example_inputs)
        cpu_inputs = [_cpu_twin(t, fake_mode) for t in example_inputs]
        _retarget_graph(gm, fake_mode)
        # The caches key this compilation apart from CPU ones (and per device):
        # the code they keep is the retargeted wrapper.
        tag = f"{torch.compiler.config.cache_key_tag}|torch_npu:retargeted-to-npu:{index}"
        with _cpu_codegen_is_npus(index), _random_operators_fall_back(), \
                torch.compiler.config.patch(cache_key_tag=tag), \
                torch._inductor.config.patch(**{"cpp.weight_prepack": False, **_npu_cpp_config(), **_NPU_RANDOM_CONFIG}):
            with _writing_update_plans(npu_graphs), _updated_ints_named(gm, example_inputs, graphs_here):
                compiled = inner(gm, cpu_inputs, *args, **kwargs)
        if _graphs_by_partition(compiled):
            return compiled  # its partitions are NPU graphs already (graph_partition.py)
        if graphs_here:
            # mode="reduce-overhead": what CUDA graphs are to cuda, NPU graphs are here.
            return _npu_graphs_of(compiled, gm, index, kwargs, example_inputs)
        if npu_graphs and kwargs.get("is_backward") and torch._inductor.config.triton.cudagraph_trees:
            return _backward_beside_npu_graphs(compiled, index)
        return compiled

    return compile_for_cpu


def compile_npu_graph(original, module, model_, example_inputs_, inner_compile=None, *args, **kwargs):
    """Inductor's compile_fx (``original``, of ``module``) for a graph with npu
    inputs, compiled as a CPU graph when they are all on one npu device.
    Called by the wrapper of compile_fx that torch_npu installs when Inductor
    loads (torch_npu/utils/_dynamo.py), after npu's Inductor setup."""
    inner = inner_compile if inner_compile is not None else module.compile_fx_inner
    index = graph_device_index(example_inputs_)
    # compile_fx calls itself (through the wrapper) for config patches and
    # subgraphs: an inner compiler that retargets already is passed through.
    if getattr(inner, "_npu_retargeting", False):
        return original(model_, example_inputs_, inner, *args, **kwargs)
    if index is None:
        with torch._inductor.config.patch(**_NPU_RANDOM_CONFIG):
            return original(model_, example_inputs_, _direct_inner(inner), *args, **kwargs)
    # mode="reduce-overhead" turns cudagraphs on; Inductor turns it off
    # again for a CPU graph, so decide here, for forward and backward.
    patches = kwargs.get("config_patches") or {}
    npu_graphs = bool(patches.get("triton.cudagraphs", torch._inductor.config.triton.cudagraphs))
    retargeting = _retargeting_inner(inner, index, npu_graphs)
    retargeting._npu_retargeting = True
    # Patched here too, before AOTAutograd's cache computes its key from
    # the config (the inner compiler patches it for the backward graph,
    # which AOTAutograd compiles later, at the first backward).
    with torch._inductor.config.patch(**_npu_cpp_config(), **_NPU_RANDOM_CONFIG):
        if npu_graphs:
            # NPU graphs wrap each compiled graph as it is compiled; a hit in
            # AOTAutograd's cache would skip that (FX graph cache hits do not).
            with torch._functorch.config.patch(enable_autograd_cache=False):
                return original(model_, example_inputs_, retargeting, *args, **kwargs)
        return original(model_, example_inputs_, retargeting, *args, **kwargs)


def retargeted_device(index):
    """The ``device`` the retargeted wrapper's code calls: cpu means the graph's npu."""
    def device(*args, **kwargs):
        d = torch.device(*args, **kwargs)
        return torch.device("npu", index) if d.type == "cpu" else d
    return device
