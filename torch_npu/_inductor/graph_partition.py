"""Inductor's graph partitions on npu: NPU graphs around what cannot be captured.

With ``torch._inductor.config.graph_partition`` (torch 2.13's default) and
CUDA graphs on (``mode="reduce-overhead"``), Inductor splits a compiled graph
at the nodes a graph cannot capture (cpu ops, device copies, ``torch.cond``,
custom ops tagged ``cudagraph_unsafe``, ...) and records each of the other
runs (a *partition*, ``partition_N(args)`` in the generated wrapper) as a
graph of the device's tree, while the rest runs eagerly in ``call`` between
them. For CUDA all of that is Inductor's; four of its decisions name CUDA,
and this module makes them npu's too (Note [Graph partitions on npu]):

- which nodes a graph can capture: the scheduler asks ``is_gpu`` of each
  node's device, which npu is not, so every npu node would be "not
  graph-able" and no partition made;
- how a partition is recorded: ``compile_fx.cudagraphify`` makes a function
  of the CUDA graph tree; an npu graph's partitions become functions of the
  NPU graph tree (``torch_npu.npu._graph_tree``);
- which graphs may be recorded at all: one cuda device passes Inductor's
  lowering check, any other is "multiple devices";
- how a backward that is not recorded tells the tree its forward's backward
  ran (``output_code.maybe_handle_backward_generation``): through the NPU
  tree's manager.
"""

import contextlib
import functools
import threading

import torch

__all__ = []

_state = threading.local()


# Note [Graph partitions on npu]
# The scheduler's partition decisions (``Scheduler.should_partition`` and the
# partition log) run with ``is_gpu`` answering yes for npu, and for cpu while
# a graph of one npu device compiles as a CPU graph (retarget.py: its "cpu"
# nodes are that npu's kernels). Only those two methods see it: elsewhere
# ``is_gpu`` picks GPU-only code paths (loop merging, zero-dim cpu scalars)
# that the C++ backend npu's kernels come from does not take.
#
# Recording goes through Inductor's own post-compile step
# (``cudagraph_partition_post_compile``: per partition, the static and
# mutated inputs, placeholders and constants of that partition), run while
# the graph is marked npu's here, so that ``cudagraphify`` and the backward
# generation handling it calls use the NPU tree. A graph of one npu device
# that compiled as a CPU graph has no device index of its own (cpu has none):
# it is given its npu's for that step. A partition whose launcher carries an
# ACLGraph update plan, and every partition while NPU graph trees are off, is
# replayed by an NpuGraphRunner, as a whole graph was. A graph compiled
# without partitions (``graph_partition=False``) is recorded whole, by
# retarget.py's ``_npu_graphs_of``, as before; one with nothing graph-able
# is not recorded.
def _npu_index_of(compiled_graph):
    """The npu device index the compiled graph's NPU graphs belong to, or None."""
    from torch_npu._inductor.retarget import compiling_device_index

    index = compiling_device_index()
    if index is not None:
        return index
    if "npu" in compiled_graph.device_types and not (compiled_graph.device_types - {"npu", "cpu", "meta"}):
        indices = list(compiled_graph.device_idxs)
        if len(indices) == 1:
            return indices[0]
    return None


def _graphs_npu(device_type):
    if device_type == "npu":
        return True
    from torch_npu._inductor.retarget import compiling_device_index

    return device_type == "cpu" and compiling_device_index() is not None


@contextlib.contextmanager
def _npu_counts_as_graph_device():
    """Within this (on this thread), the scheduler's ``is_gpu`` answers yes
    for npu: see ``_is_gpu_in_partition_decisions``."""
    depth = getattr(_state, "partitioning", 0)
    _state.partitioning = depth + 1
    try:
        yield
    finally:
        _state.partitioning = depth


def _is_gpu_in_partition_decisions(inductor_is_gpu):
    """The scheduler module's ``is_gpu``, installed once: Inductor's answer,
    and yes for npu while this thread makes a partition decision (the flag
    is per thread, so a compilation on another thread is not affected)."""
    @functools.wraps(inductor_is_gpu)
    def is_gpu(device):
        return inductor_is_gpu(device) or (getattr(_state, "partitioning", 0) > 0 and _graphs_npu(device))

    return is_gpu


def _with_npu_as_graph_device(method):
    @functools.wraps(method)
    def wrapped(*args, **kwargs):
        with _npu_counts_as_graph_device():
            return method(*args, **kwargs)

    return wrapped


def _should_partition_on_npu(inductor_should_partition):
    """Inductor's decision, with npu as a graph device, and one more rule:
    the item a ``MultiOutput`` takes from the list a node that is not
    graph-able returned (``torch.cond``'s outputs, a ``cudagraph_unsafe``
    custom op's tuple) stays outside the graphs too. Alone in a partition it
    would take the list as its input, which is not a tensor: a graph neither
    copies it in nor sees that its output aliases it, so the warm-up counted
    the item as memory of the graphs' pool (and a replay would return the
    item of the list it was recorded with)."""
    inductor_method = _with_npu_as_graph_device(inductor_should_partition)

    @functools.wraps(inductor_should_partition)
    def should_partition(self, node):
        reason = inductor_method(self, node)
        if reason is None:
            from torch._inductor import ir

            if isinstance(node.node, ir.MultiOutput):
                source = self.name_to_buf.get(node.node.inputs[0].get_name())
                if source is not None and source.defining_op is not node and \
                        inductor_method(self, source.defining_op) is not None:
                    return "an item of the outputs of a non-graphable op"
        return reason

    return should_partition


def _lowering_check_on_npu(inductor_check):
    """``cudagraph_utils.check_lowering_disable_cudagraph`` lets one cuda
    device through and calls any other device "multiple devices": one npu
    device (the "cpu" of a graph compiled as a CPU graph for it) passes too."""
    @functools.wraps(inductor_check)
    def check(device_node_mapping):
        from torch._inductor.cudagraph_utils import is_using_cudagraph_partition
        from torch_npu._inductor.retarget import compiling_device_index

        index = compiling_device_index()
        devices = {torch.device("npu", index) if index is not None and d.type == "cpu" else d
                   for d in device_node_mapping if d.type != "meta"}
        if is_using_cudagraph_partition():
            devices.discard(torch.device("cpu"))
        if len(devices) == 1 and next(iter(devices)).type == "npu":
            return None
        return inductor_check(device_node_mapping)

    return check


def _npu_cudagraphify(model, static_input_idxs=(), *, device_index, stack_traces, is_backward, is_inference,
                      constants=(), placeholders=(), mutated_input_idxs=()):
    """``compile_fx.cudagraphify`` for npu: the partition (or graph) as a
    function of the NPU graph tree, made at its first call, which has the
    real inputs; with NPU graph trees off, an NpuGraphRunner."""
    from torch_npu._inductor._aclgraph_update_plan.codegen import PARTITION_ARGUMENT_NAMES
    from torch_npu._inductor.npugraph_runner import NpuGraphRunner, _update_plan_of
    from torch_npu._inductor.retarget import updated_int_names
    from torch_npu.npu._graph_tree import npugraphify_at_first_call

    if not torch._inductor.config.triton.cudagraph_trees or _update_plan_of(model):
        # A partition whose captured operators are updated per call (its
        # launcher carries an ACLGraph update plan) replays through
        # NpuGraphRunner, which applies the plan, as a whole graph does.
        model._boxed_call = True  # Inductor calls its partitions with one list, as compiled graphs
        names = updated_int_names()
        arguments = getattr(model, PARTITION_ARGUMENT_NAMES, None) or [p.name for p in placeholders]
        updated = [i for i, name in enumerate(arguments) if name in names]
        return NpuGraphRunner(model, tuple(static_input_idxs), tuple(mutated_input_idxs),
                              name="backward graph" if is_backward else "graph", updated_ints=updated)
    return npugraphify_at_first_call(model, static_input_idxs, device_index=device_index, is_backward=is_backward,
                                     is_inference=is_inference, stack_traces=stack_traces, constants=constants,
                                     placeholders=placeholders, mutated_input_idxs=mutated_input_idxs)


def _npu_backward_generation(compiled_graph, boxed_forward_device_index):
    """A backward that runs without NPU graphs while its forward was recorded
    tells the NPU tree it ran (Note [Backward Generation Handling] in torch's
    cudagraph_trees)."""
    if not (compiled_graph.fx_kwargs["is_backward"] and torch._inductor.config.triton.cudagraph_trees):
        return
    if boxed_forward_device_index is None or boxed_forward_device_index.value is None:
        return  # the forward was not recorded either
    from torch_npu.npu._graph_tree import get_manager

    manager = get_manager(boxed_forward_device_index.value, create_if_none_exists=False)
    if manager is None:
        return
    compiled = compiled_graph.current_callable

    def run(new_inputs):
        manager.set_to_running_backward()
        return compiled(new_inputs)

    compiled_graph.current_callable = run


def _records_whole(compiled_graph):
    """A graph compiled as a CPU graph that retarget.py records whole (Note
    [Graph partitions on npu]): one compiled without partitions. With them,
    a graph that has nothing graph-able (no partition map) is not recorded
    at all, as on CUDA."""
    return compiled_graph.partition_maps is None


def _post_compile_on_npu(post_compile):
    @functools.wraps(post_compile)
    def wrapped(self, example_inputs, constants, graph_kwargs):
        from torch._inductor.utils import BoxedBool
        from torch_npu._inductor.retarget import compiling_device_index

        self._npu_graphs_by_partition = False  # decided afresh each time (a graph from the cache too)
        index = _npu_index_of(self)
        cudagraphs = graph_kwargs.get("cudagraphs")
        if index is None or not cudagraphs:
            return post_compile(self, example_inputs, constants, graph_kwargs)
        retargeted = compiling_device_index() is not None
        if retargeted and _records_whole(self):
            # As before partitions: Inductor does not record this graph, and
            # neither will it the backward (the flag is the forward's too).
            BoxedBool.disable(cudagraphs)
            return post_compile(self, example_inputs, constants, graph_kwargs)
        self._npu_graphs_by_partition = True
        saved_idxs = self.device_idxs
        if retargeted:
            from torch.utils._ordered_set import OrderedSet
            self.device_idxs = OrderedSet([index])
        _state.npu = True
        try:
            return post_compile(self, example_inputs, constants, graph_kwargs)
        finally:
            _state.npu = False
            self.device_idxs = saved_idxs

    return wrapped


def _on_npu_use(npu_function, inductor_function):
    @functools.wraps(inductor_function)
    def wrapped(*args, **kwargs):
        if getattr(_state, "npu", False):
            return npu_function(*args, **kwargs)
        return inductor_function(*args, **kwargs)

    return wrapped


def install():
    """Makes Inductor's graph partitions npu's too (once, at npu's Inductor setup)."""
    from torch._inductor import compile_fx, cudagraph_utils, output_code, scheduler

    if getattr(scheduler.Scheduler.should_partition, "_npu_partitions", False):
        return
    scheduler.is_gpu = _is_gpu_in_partition_decisions(scheduler.is_gpu)
    should_partition = _should_partition_on_npu(scheduler.Scheduler.should_partition)
    should_partition._npu_partitions = True
    scheduler.Scheduler.should_partition = should_partition
    scheduler.Scheduler._log_graph_partitions = _with_npu_as_graph_device(scheduler.Scheduler._log_graph_partitions)
    cudagraph_utils.check_lowering_disable_cudagraph = _lowering_check_on_npu(
        cudagraph_utils.check_lowering_disable_cudagraph)
    output_code.CompiledFxGraph.post_compile = _post_compile_on_npu(output_code.CompiledFxGraph.post_compile)
    # Both are looked up as module attributes when called (output_code imports
    # cudagraphify from compile_fx inside the function that uses it).
    compile_fx.cudagraphify = _on_npu_use(_npu_cudagraphify, compile_fx.cudagraphify)
    output_code.maybe_handle_backward_generation = _on_npu_use(_npu_backward_generation,
                                                               output_code.maybe_handle_backward_generation)
