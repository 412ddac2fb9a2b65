"""NPU graph trees: the NPU graphs of compiled code, recorded in a tree per device.

This is Inductor's CUDA graph trees (``torch/_inductor/cudagraph_trees.py``)
on NPU graphs, under real torch_npu's names. The graphs of one device share
one memory pool and form a tree: a graph recorded while outputs of another
are alive is its child, and runs after it. Per function the tree manager
warms up (the first call runs eagerly, in the pool), records (the next call
captures a graph), then replays; a call that starts a new generation (the
next compiled call, or ``torch.compiler.npugraph_mark_step_begin()``) may
overwrite the outputs of the previous one.

What is PyTorch's and what is NPU's:

- Reused from ``torch._inductor.cudagraph_trees``, unchanged: the ids and
  states (``FunctionID``, ``GraphID``, ``ExecutionState``,
  ``CompilationMode``, ``WrappedFunction``), ``StorageWeakRefWrapper``,
  ``format_tb``, the output alias markers, and every method of the nodes and
  the manager that only walks the tree: path liveness, invariant checks,
  cached output tensors, output reconstruction, generations, warm-up /
  record / replay decisions (``CUDAGraphTreeManager._run``).
- Written here: what touches the device, the allocator or the streams
  (captures with ``torch.npu.graph``, routing allocations to the pool with
  ``_use_npu_memory_pool_manager``, pool checks over ``memory_snapshot``),
  the TLS containers, ``npugraphify``, real torch_npu's errors (RuntimeError
  where torch asserts) and warnings in NPU wording, and the two places where
  vNPU's allocator differs (Note [Graph-tree outputs own their memory]).

One file, as real torch_npu's: its tests patch module names (check_memory_pool,
get_npugraph_segments, _use_npu_memory_pool_manager, NPUGraphNode, ...) and
expect the nodes, the manager and the pool checks to look them up here.

Note [Graph-tree outputs own their memory]
CUDA graph trees return the recorded outputs themselves and let the pool
free their blocks when they die; before the next recording they restore the
pool to the state after the current node (``_cuda_setCheckpointPoolState``),
and when a new generation starts they free the still-live outputs and make
any later access raise (``_free_And_Remove_DeleterFn``,
``_set_storage_access_error_msg``). vNPU's allocator has none of these
bindings. Instead each node keeps the storages its capture allocated for its
outputs for as long as it lives, and hands out non-owning tensors over that
memory (at the recording as at every replay). So the pool always counts every
recorded output as allocated: a later recording or warm-up, wherever it is in
the tree, can never take an output's memory, and no restore is needed (the
cost: outputs of different nodes do not share memory). When a generation
starts while outputs of the previous one are still held, those tensors are
moved to memory of their own with their values (``_detach_from_pool``:
a copy and ``UntypedStorage._swap_data_ptr_``), instead of being made to
raise; the next replay cannot overwrite them, and a program reads what eager
execution would have given it.
"""

import contextlib
import functools
import gc
import itertools
import operator
import threading
import warnings
import weakref
from collections import defaultdict

import torch
from torch._dynamo.callback import CallbackTrigger
from torch._dynamo.mutation_guard import GenerationTracker
from torch._dynamo.utils import preserve_rng_state
from torch._inductor import config
from torch._inductor import cudagraph_trees as _trees
from torch._inductor.compile_fx import (
    align_inputs_from_check_idxs,
    copy_misaligned_inputs,
    get_expanded_dims,
    get_input_idxs_to_check,
    remove_unaligned_input_idxs,
    static_input,
)
from torch._inductor.cudagraph_trees import (  # noqa: F401  (re-exported, real torch_npu's names)
    CompilationMode,
    ExecutionState,
    FunctionID,
    GraphID,
    OutputAliasInfo,
    StorageWeakRefWrapper,
    UnaliasedStorage,
    WrappedFunction,
    format_tb,
    is_live,
    maybe_deref,
)
from torch._inductor.cudagraph_utils import (
    CheckInvariantStatus,
    log_data_ptr_mismatch,
    maybe_warning_due_to_dynamic_shape,
)
from torch._library.opaque_object import is_opaque_value
from torch._opaque_base import OpaqueBase
from torch.utils._ordered_set import OrderedSet
from torch.utils.weak import TensorWeakRef

import torch_npu
from torch_npu.npu._graph_pool import blocks_by_address
from torch_npu.npu._graph_tree_state import MarkStepBox, mark_step_begin  # noqa: F401
from torch_npu.npu._npugraph_conditional_nodes import (
    ControlFlowOpWarmupDispatchMode,
    NPUGraphCaptureControlFlowOpDispatchMode,
)

__all__ = []

# The "cudagraphs" artifact of real torch_npu's "npugraph" log
# (TORCH_LOGS="cudagraphs" or torch._logging.set_logs(cudagraphs=True)).
log = torch._logging.getArtifactLogger("torch_npu.npugraph", "cudagraphs")


def _check(condition, text):
    """Real torch_npu's form of torch's asserts here: a RuntimeError naming the check."""
    if not condition:
        raise RuntimeError(f"check {text} fail")


def clear_cublass_cache():
    """CUDA clears cuBLAS's persistent workspaces around warm-ups and captures, so
    that a workspace made then lives in the pool. vNPU's matmuls keep no
    workspace from call to call: there is nothing to clear."""


@contextlib.contextmanager
def clear_cublas_manager():
    """Clears the matmul workspaces on entry and on exit."""
    clear_cublass_cache()
    try:
        yield
    finally:
        clear_cublass_cache()


@contextlib.contextmanager
def disable_conv_cache_emptying():
    """CUDA keeps cuDNN's benchmark from emptying the cache during a capture;
    vNPU's convolutions benchmark nothing."""
    yield


@contextlib.contextmanager
def enable_history_recording():
    """Records the allocator's history (the stack of each allocation) while inside."""
    enabled = torch_npu._C._npu_isHistoryEnabled()
    try:
        if not enabled:
            torch.npu.memory._record_memory_history()
        yield
    finally:
        if not enabled:
            torch.npu.memory._record_memory_history(None)


def get_history_recording():
    if not config.triton.cudagraph_trees_history_recording:
        return contextlib.nullcontext()
    return enable_history_recording()


class TreeManagerContainer:
    """Holds the tree manager of one device while functions that use it live
    (torch's container, with NPU names): ``add_strong_reference`` counts a
    function, its finalizer uncounts it, and the last one drops the manager."""

    def __init__(self, device_index):
        self.tree_manager = None
        self.live_npugraphify_fns = 0
        self.device_index = device_index
        self.live_storages_count = 0
        self.graph = None
        self.lock = threading.Lock()

    def _finalize_tensor(self):
        with self.lock:
            self.live_storages_count -= 1
            if self.live_storages_count == 0:
                self.graph = None
                if self.live_npugraphify_fns == 0:
                    self.tree_manager = None

    def finalize_npugraphify_fn(self):
        with self.lock:
            self.live_npugraphify_fns -= 1
            if self.live_npugraphify_fns == 0:
                self._finalize_tree_manager()

    def _finalize_tree_manager(self):
        _check(self.lock.locked(), "self.lock.locked()")
        self.tree_manager = None

    def add_strong_reference(self, fn):
        with self.lock:
            self.live_npugraphify_fns += 1
        weakref.finalize(fn, self.finalize_npugraphify_fn)

    def get_tree_manager(self):
        with self.lock:
            if self.tree_manager is None:
                self.tree_manager = NPUGraphTreeManager(self.device_index)
            return self.tree_manager


def _initialize_tls(thread_local):
    # One container per device. Stashed so that autograd's threads, which
    # run compiled backwards, see the same containers (torch copies stashed
    # objects into the threads it starts).
    thread_local.npu_tree_manager_containers = {}
    thread_local.npu_tree_manager_locks = defaultdict(threading.Lock)
    torch._C._stash_obj_in_tls("npu_tree_manager_containers", thread_local.npu_tree_manager_containers)
    torch._C._stash_obj_in_tls("npu_tree_manager_locks", thread_local.npu_tree_manager_locks)


local = threading.local()
_initialize_tls(local)

# Captures and pool routing are process-wide: one at a time, NPU's and CUDA's alike.
graph_capture_lock = _trees.graph_capture_lock


def get_obj(thread_local, attr_name):
    if hasattr(thread_local, attr_name):
        return getattr(thread_local, attr_name)
    if not torch._C._is_key_in_tls(attr_name):
        _initialize_tls(thread_local)
        return getattr(thread_local, attr_name)
    return torch._C._get_obj_in_tls(attr_name)


def reset_npugraph_trees():
    """Drops every NPU graph tree (``torch.compiler.reset()`` reaches this
    through the "npugraphs" backend's reset)."""
    if torch._C._is_key_in_tls("npu_tree_manager_containers") or hasattr(local, "npu_tree_manager_containers"):
        container_dict = get_obj(local, "npu_tree_manager_containers")
        locks_dict = get_obj(local, "npu_tree_manager_locks")
        for device, lock in list(locks_dict.items()):
            with lock:
                container = container_dict.get(device)
                if not container or not container.tree_manager:
                    continue
                container.tree_manager.shutdown()
        container_dict.clear()
    torch._C._set_cached_tensors_enabled(False)
    MarkStepBox.mark_step_counter = 0


def get_container(device_index):
    container_dict = get_obj(local, "npu_tree_manager_containers")
    lock = get_obj(local, "npu_tree_manager_locks")[device_index]
    with lock:
        if device_index not in container_dict:
            container_dict[device_index] = TreeManagerContainer(device_index)
        return container_dict[device_index]


def get_manager(device_index, create_if_none_exists=True):
    """The tree manager of npu ``device_index`` (made on first use unless
    ``create_if_none_exists`` is false: then None if there is none)."""
    if create_if_none_exists:
        return get_container(device_index).get_tree_manager()
    return get_container(device_index).tree_manager


def npugraphify_impl(model, inputs, static_input_idxs, *args, **kwargs):
    """``model`` (a boxed compiled graph) under the tree manager, one tree
    function per value of its integer inputs (torch's ``cudagraphify_impl``)."""
    fn_cache = {}
    int_key = [i for i, v in enumerate(inputs) if isinstance(v, int)]
    get_ints = operator.itemgetter(*int_key) if int_key else (lambda _: None)
    has_warn = False
    del inputs

    def deferred_npugraphify(inputs):
        nonlocal has_warn
        int_key = get_ints(inputs)
        if not _trees.is_cudagraph_capture_sizes(int_key):
            return model(inputs)
        fn = fn_cache.get(int_key)
        if fn is not None:
            return fn(inputs)
        if not has_warn:
            has_warn = maybe_warning_due_to_dynamic_shape(fn_cache, int_key)
        # Misaligned inputs are copied into aligned ones first, as for CUDA.
        check_input_idxs = get_input_idxs_to_check(inputs, static_input_idxs)
        new_static_input_idxs = remove_unaligned_input_idxs(inputs, static_input_idxs)
        copy_misaligned_inputs(inputs, check_input_idxs)
        fn, out = npugraphify(model, inputs, new_static_input_idxs, *args, **kwargs)
        fn = align_inputs_from_check_idxs(fn, inputs_to_check=check_input_idxs, mutated_input_idxs=OrderedSet())
        fn_cache[int_key] = fn
        return out

    return deferred_npugraphify


def npugraphify_at_first_call(model, static_input_idxs, **kwargs):
    """``model`` (a boxed compiled graph or partition) as a function of the
    tree, made by ``npugraphify_impl`` at its first call, which has the real
    inputs (what Inductor's ``cudagraphify`` returns for CUDA)."""
    made = []

    def run(new_inputs):
        if not made:
            with preserve_rng_state():
                made.append(npugraphify_impl(model, new_inputs, static_input_idxs, **kwargs))
        return made[0](new_inputs)

    run._boxed_call = True
    return run


def npugraphify(model, inputs, static_input_idxs=(), *, device_index, is_backward, is_inference,
                stack_traces=None, constants=(), placeholders=(), mutated_input_idxs=()):
    """Adds ``model`` to the tree of npu ``device_index`` and runs it on
    ``inputs``: returns the tree's function and this call's outputs."""
    if is_backward and is_inference:
        raise RuntimeError("check is_backward and is_inference fail")
    if is_backward:
        mode = CompilationMode.BACKWARD
    else:
        mode = CompilationMode.INFERENCE if is_inference else CompilationMode.FORWARD
    manager = get_container(device_index).get_tree_manager()
    return manager.add_function(model, inputs, static_input_idxs, stack_traces, mode, constants, placeholders,
                                mutated_input_idxs)


@contextlib.contextmanager
def _use_npu_memory_pool_manager(device, mem_pool, stream):
    """This thread's allocations go to ``mem_pool`` on ``stream`` while inside
    (torch's ``_use_cuda_memory_pool_manager``). Every graph output the tree
    holds must be allocated in the pool, or it would be handed out again."""
    torch.npu.synchronize()
    stream.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(stream), torch.device("npu", device):
        torch_npu._C._npu_beginAllocateCurrentThreadToPool(device, mem_pool)
        try:
            yield
        finally:
            torch_npu._C._npu_endAllocateToPool(device, mem_pool)
            torch_npu._C._npu_releasePool(device, mem_pool)
    torch.npu.current_stream().wait_stream(stream)


def map_to_ref(t):
    if not isinstance(t, torch.Tensor):
        _check(t is None, "t is None")
        return None
    return StorageWeakRefWrapper(t)


def _is_npu(t):
    return isinstance(t, torch.Tensor) and t.device.type == "npu"


class NPUWarmupNode(_trees.CUDAWarmupNode):
    """One eager run of a function in the pool, before it is recorded
    (torch's warm-up node: its outputs are tracked like a graph's)."""

    def __init__(self, wrapped_function, parent, npu_graphs_pool, existing_npu_graph, device_index, stack_traces,
                 stream, already_warm, graph_id):
        super().__init__(wrapped_function, parent, npu_graphs_pool, existing_npu_graph, device_index, stack_traces,
                         stream, already_warm, graph_id)
        self.npu_graphs_pool = npu_graphs_pool
        self.existing_npu_graph = existing_npu_graph

    def run(self, new_inputs):
        if self.has_run:
            raise RuntimeError("Wrapped function should never be run twice")
        self.has_run = True
        # Outputs are the storages made here, never inputs the function passes through.
        existing_path_data_ptrs = OrderedSet([t.data_ptr() for t in self.path_live_weakrefs() if t()])
        non_npugraph_inps = [
            weakref.ref(t.untyped_storage())
            for t in itertools.chain(new_inputs, self.wrapped_function.constants)
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in existing_path_data_ptrs
        ]
        if config.triton.slow_path_cudagraph_asserts and not self.already_warm:
            check_memory_pool(self.device_index, self.npu_graphs_pool,
                              list(self.path_live_weakrefs()) + _owned_output_refs(self.npu_graphs_pool))
        with torch.npu.device(self.device_index), disable_conv_cache_emptying(), clear_cublas_manager(), \
                _use_npu_memory_pool_manager(self.device_index, self.npu_graphs_pool, self.stream), \
                ControlFlowOpWarmupDispatchMode(), get_history_recording():
            out = self.wrapped_function.model(new_inputs)
        input_storages = OrderedSet()
        for ref in non_npugraph_inps:
            s = ref()
            if s is not None:
                input_storages.add(s._cdata)
        _check(len(new_inputs) == 0, "len(new_inputs) == 0")

        def add_ref(o):
            return _is_npu(o) and o.untyped_storage()._cdata not in input_storages \
                and o.untyped_storage().data_ptr() != 0

        self.outputs_weakrefs.extend([map_to_ref(o) if add_ref(o) else None for o in out])
        self.tensor_weakrefs.extend([TensorWeakRef(o) if add_ref(o) else None for o in out])
        if config.triton.slow_path_cudagraph_asserts and not self.already_warm:
            check_memory_pool(self.device_index, self.npu_graphs_pool,
                              list(self.path_live_weakrefs()) + _owned_output_refs(self.npu_graphs_pool))
        return out

    _is_npu_graph_recorded_tensor = _trees.CUDAWarmupNode._is_cuda_graph_recorded_tensor


class AliasesPriorGraphOutput(_trees.AliasesPriorGraphOutput):
    """Marks that the graph output aliases an output of a prior graph."""

    __slots__ = []

    def __init__(self, index):
        _check(isinstance(index, tuple), "isinstance(index, tuple)")
        self.index = index


class AliasesNewOutput(_trees.AliasesNewOutput):
    """Marks that the graph output aliases an index in the new, returned outputs."""

    __slots__ = []

    def __init__(self, index):
        _check(isinstance(index, int), "isinstance(index, int)")
        self.index = index


# The formats a tensor gets from its dimensions (real torch_npu's base formats):
# NCHW, NHWC, ND, NCDHW, NDHWC, NC, NCL.
_BASE_FORMATS = frozenset((0, 1, 2, 30, 27, 35, 47))


def _storage_alias(storage):
    """A storage over ``storage``'s memory that does not own it."""
    return torch_npu._C._construct_storage_from_data_pointer(storage.data_ptr(), storage.device, storage.nbytes())


def _detach_live_outputs(node):
    """Moves the outputs of ``node`` (a graph or warm-up node) that are still
    held out of the pool (``_detach_from_pool``). A graph node that was
    handing out a held tensor as its cached output stops caching: its next
    replay makes new output tensors."""
    held = [i for i, ref in enumerate(node.outputs_weakrefs) if ref is not None and ref() is not None]
    if not held:
        return
    cached = getattr(node, "cached_tensor_outputs", None)
    if cached and any(cached[i] is not None for i in held):
        node.remove_node_cached_tensors()
    for i in held:
        ref = node.outputs_weakrefs[i]
        cdata = ref()
        if cdata is None:
            continue
        storage = torch.UntypedStorage._new_with_weak_ptr(cdata)
        if storage.data_ptr() == ref.data_ptr():  # not moved already
            _detach_from_pool(storage)


_nodes_of_pool = defaultdict(weakref.WeakSet)  # pool id -> its NPUGraphNodes


def _owned_output_refs(pool):
    """The memory graph nodes of ``pool`` own, for the pool checks."""
    return [StorageWeakRefWrapper(s) for node in list(_nodes_of_pool.get(pool, ())) for s in node.owned_output_storages]


def _detach_from_pool(storage):
    """Moves the memory of ``storage`` (a non-owning alias of a graph's output)
    to a fresh allocation with the same bytes; every tensor over the storage
    follows (Note [Graph-tree outputs own their memory])."""
    fresh = torch.empty(storage.nbytes(), dtype=torch.uint8, device=storage.device).untyped_storage()
    fresh.copy_(storage)
    storage._swap_data_ptr_(fresh)


class NPUGraphNode(_trees.CUDAGraphNode):
    """One recording of a function into an NPU graph, in the tree's shared pool
    (torch's graph node). Recorded when made; ``run`` replays it."""

    def __init__(self, wrapped_function, graph_id, parent, inputs, npu_graphs_pool, device_index, stack_traces,
                 stream):
        if not isinstance(inputs, (list, tuple)):
            raise RuntimeError(f"check isinstance(inputs, (list, tuple)) fail: got {type(inputs).__name__}")
        self.wrapped_function = wrapped_function
        self.id = graph_id
        self.device = device_index
        self.stack_traces = stack_traces
        self.stream = stream
        # A static input that moved (a replaced parameter) re-records the graph.
        self.rerecord_if_static_inputs_change = True
        self._parent = weakref.ref(parent) if parent is not None else None
        self.npu_graphs_pool = npu_graphs_pool
        self.children = defaultdict(list)
        # Never reassigned (children hold this list in their path_weakrefs), only cleared.
        self.outputs_weakrefs = []
        self.path_weakrefs = [node.outputs_weakrefs for node in self._path_from_root]
        self.path_stacktraces = [node.stack_traces for node in self._path_from_root]
        self.tensor_weakrefs = []

        # Inputs that are outputs of earlier graphs of the path: their memory is the pool's.
        self.npugraph_managed_idxs = [
            idx for idx, t in enumerate(inputs) if isinstance(t, torch.Tensor) and self._is_npu_graph_recorded_tensor(t)
        ]
        self.live_npugraph_managed_path_refs = [
            self._is_alias_of_live_recorded_tensor(t) if isinstance(t, torch.Tensor) else None for t in inputs
        ]
        self.preserved_aliased_inputs = [False] * len(inputs)
        opaque_input_idxs = OrderedSet(i for i, inp in enumerate(inputs) if is_opaque_value(inp))
        static_input_idxs = OrderedSet(wrapped_function.static_input_idxs)
        managed_idxs = OrderedSet(self.npugraph_managed_idxs)
        self.static_input_idxs = list(static_input_idxs | managed_idxs | opaque_input_idxs)
        self.non_static_input_idx = [i for i in range(len(inputs)) if i not in self.static_input_idxs]
        self.non_managed_static_input_idxs = list(static_input_idxs - managed_idxs - opaque_input_idxs)
        self.tensor_static_input_idxs = list(static_input_idxs | managed_idxs)
        self.static_input_data_ptrs = [
            inp.data_ptr() if isinstance(inp, torch.Tensor) and i in self.static_input_idxs else None
            for i, inp in enumerate(inputs)
        ]
        self.expanded_dims = [
            get_expanded_dims(x) if isinstance(x, torch.Tensor) and idx not in self.static_input_idxs else []
            for idx, x in enumerate(inputs)
        ]

        self.recorded_liveness_before_graph = []
        self.recorded_liveness_after_graph = []
        self.expected_dead_indices_before_graph = []
        self.expected_dead_indices_after_graph = []
        self.live_indices_after_graph = []
        if self.parent is not None:
            previous_liveness = self.parent.recorded_liveness_after_graph
            curr_liveness = self._get_liveness(self.path_weakrefs)
            self.recorded_liveness_before_graph = curr_liveness
            self.expected_dead_indices_before_graph = self._get_different_indices(previous_liveness, curr_liveness)

        rng_states = [inp for inp in inputs if isinstance(inp, torch.Generator)]
        recording_inputs = self._allocate_and_copy_recording_inputs(inputs)
        # The recording inputs hold copies: the caller's may be freed.
        inputs.clear()
        del inputs

        self.graph = torch.npu.NPUGraph()
        with torch.npu.device(self.device):
            for rng_state in rng_states:
                self.graph.register_generator_state(rng_state)
        # Non-owning tensors over the recording inputs' memory, which replays
        # copy new inputs into.
        self.reconstructed_inputs = [
            self._reconstruct_from_tensor_metadata(self._tensor_metadata(x)) if isinstance(x, torch.Tensor) else x
            for x in recording_inputs
        ]
        self.checkpointed_caching_state = None
        self.output_storage_alias = []
        self.unaliased_in_all_paths = []
        self.cached_tensor_outputs = []
        self.static_output_tensors = []
        # Note [Graph-tree outputs own their memory]: the storages the capture
        # allocated for the outputs, kept for the node's life.
        self.owned_output_storages = []
        if isinstance(npu_graphs_pool, tuple):
            _nodes_of_pool[npu_graphs_pool].add(self)
        self.recording_outputs = self._record(wrapped_function.model, recording_inputs)
        self.outputs_metadata = []
        _check(self.recording_outputs is not None, "self.recording_outputs is not None")
        for out in self.recording_outputs:
            if isinstance(out, torch.Tensor):
                self.outputs_metadata.append(self._tensor_metadata(out, ignore_storage_offset=False))
            else:
                _check(isinstance(out, (int, type(None))), "isinstance(out, (int, type(None)))")
                self.outputs_metadata.append(out)
        # A capture runs nothing: this replay computes the first call's outputs.
        self.graph.replay()

    _is_npu_graph_recorded_tensor = _trees.CUDAGraphNode._is_cuda_graph_recorded_tensor

    def check_static_inputs_are_stable(self, new_inputs):
        if not self.rerecord_if_static_inputs_change and not torch_npu._C._tensors_data_ptrs_at_indices_equal(
                new_inputs, self.static_input_data_ptrs, self.non_managed_static_input_idxs):
            error_msg = log_data_ptr_mismatch(self.wrapped_function.placeholders, new_inputs,
                                              self.static_input_data_ptrs, self.non_managed_static_input_idxs,
                                              CheckInvariantStatus.StaticInputIdxMismatch)
            torch._check(False, lambda: error_msg)

    def run(self, new_inputs):
        self.check_static_inputs_are_stable(new_inputs)
        self._copy_inputs_and_remove_from_src(self.reconstructed_inputs, new_inputs)
        self.run_graph()
        outputs = self.reconstruct_outputs()
        new_inputs.clear()
        if config.triton.fast_path_cudagraph_asserts:
            self.debug_check_invariants_after_invocation()
        if config.triton.force_cudagraph_sync:
            torch.npu.synchronize()
        self.static_inputs_stable = False
        return outputs

    def prepare_alias_info_for_tensor_construction(self, out_alias_info, metadata):
        if isinstance(metadata, (int, type(None))) or out_alias_info is UnaliasedStorage:
            return None
        if isinstance(out_alias_info, _trees.AliasesPriorGraphOutput):
            depth, existing_output_index = out_alias_info.index
            ref = self.path_weakrefs[depth][existing_output_index]
            _check(ref is not None, "ref is not None")
            return torch.UntypedStorage._new_with_weak_ptr(ref())
        _check(isinstance(out_alias_info, _trees.AliasesNewOutput), "isinstance(out_alias_info, AliasesNewOutput)")
        return out_alias_info.index

    def run_graph(self):
        _check(self.graph is not None, "self.graph is not None")
        self.graph.replay()

    def _record(self, model, inputs):
        """Captures ``model`` on ``inputs`` into this node's graph; returns its
        outputs, fresh ones as non-owning tensors over memory the node keeps."""
        _check(self.graph is not None, "self.graph is not None")

        def static_input_iter():
            for i in self.wrapped_function.static_input_idxs:
                inp = inputs[i]
                if isinstance(inp, torch.Tensor) and not self._is_npu_graph_recorded_tensor(inp):
                    yield inp

        # Outputs that alias these (parameters, constants) are static outputs.
        static_input_persistent_storage_ptrs = {
            inp.untyped_storage().data_ptr(): StorageWeakRefWrapper(inp)
            for inp in itertools.chain(static_input_iter(), self.wrapped_function.constants)
        }
        if config.triton.slow_path_cudagraph_asserts:
            memory = [] if self.parent is None else list(self.parent.path_live_weakrefs())
            memory += [
                StorageWeakRefWrapper(elem) for i, elem in enumerate(inputs)
                if isinstance(elem, torch.Tensor) and i not in self.wrapped_function.static_input_idxs
                and elem.untyped_storage().data_ptr() != 0
            ]
            check_memory_pool(self.device, self.npu_graphs_pool, memory + _owned_output_refs(self.npu_graphs_pool))
        with preserve_rng_state(), torch.npu.device(self.device), clear_cublas_manager(), \
                torch.npu.graph(self.graph, stream=self.stream, pool=self.npu_graphs_pool,
                                capture_error_mode="thread_local"), \
                NPUGraphCaptureControlFlowOpDispatchMode(), get_history_recording():
            static_outputs = model(inputs)
        _check(len(inputs) == 0, "len(inputs) == 0")
        if not isinstance(static_outputs, (list, tuple)):
            static_outputs = (static_outputs,)
        return self._add_first_outputs(static_outputs, static_input_persistent_storage_ptrs)

    def _add_first_outputs(self, outputs, static_input_persistent_storage_ptrs):
        """Classifies the first outputs (static, alias of a prior graph's,
        alias of an earlier output, fresh), takes ownership of the fresh ones'
        memory and returns the outputs with non-owning tensors in their place."""
        prev_liveness = self.recorded_liveness_before_graph
        curr_liveness = self._get_liveness(self.path_weakrefs)
        self.expected_dead_indices_after_graph = self._get_different_indices(prev_liveness, curr_liveness)
        _check(len(self.outputs_weakrefs) == 0, "len(self.outputs_weakrefs) == 0")
        output_new_storages_index = {}
        self.unaliased_in_all_paths = [False for _ in range(len(outputs))]
        self.static_output_tensors = [None for _ in range(len(outputs))]
        for i, o in enumerate(outputs):
            if o is None or not isinstance(o, torch.Tensor):
                self.output_storage_alias.append(UnaliasedStorage)
                continue
            torch._check(
                _is_npu(o) or o.untyped_storage().data_ptr() == 0,
                lambda: "Expected all npu outputs in npu graph recording. Non npu output from "
                        f"{self.stack_traces[i] if self.stack_traces else '(unknown)'}",
            )
            ref = static_input_persistent_storage_ptrs.get(o.untyped_storage().data_ptr())
            is_empty_storage = o.untyped_storage().data_ptr() == 0
            if (ref and ref() is not None) or is_empty_storage:
                self.output_storage_alias.append(None)
                self.static_output_tensors[i] = o
                continue
            path_ref = self._is_alias_of_live_recorded_tensor(o)
            if path_ref is not None:
                self._mark_prior_graph_output_as_aliased(path_ref)
                for idx, inp_path_ref in enumerate(self.live_npugraph_managed_path_refs):
                    if path_ref == inp_path_ref:
                        self.preserved_aliased_inputs[idx] = True
                self.output_storage_alias.append(AliasesPriorGraphOutput(path_ref))
                continue
            if o.untyped_storage().data_ptr() in output_new_storages_index:
                index = output_new_storages_index[o.untyped_storage().data_ptr()]
                self.unaliased_in_all_paths[index] = False
                self.output_storage_alias.append(AliasesNewOutput(index))
                continue
            output_new_storages_index[o.untyped_storage().data_ptr()] = i
            self.output_storage_alias.append(UnaliasedStorage)
            self.unaliased_in_all_paths[i] = True

        outputs = self._own_fresh_outputs(outputs)
        if self.stack_traces is None:
            self.stack_traces = [None for _ in range(len(outputs))]
        elif len(self.stack_traces) != len(outputs):
            raise RuntimeError("Wrong number of stack traces passed in")
        for out, static_output_tensor in zip(outputs, self.static_output_tensors):
            if not isinstance(out, torch.Tensor) or static_output_tensor is not None:
                self.outputs_weakrefs.append(None)
                self.tensor_weakrefs.append(None)
            else:
                self.outputs_weakrefs.append(StorageWeakRefWrapper(out))
                self.tensor_weakrefs.append(TensorWeakRef(out))
        self.recorded_liveness_after_graph = self._get_liveness(self.path_weakrefs)
        self.checkpointed_caching_state = torch_npu._C._npu_getCheckpointState(self.device, self.npu_graphs_pool)
        for depth in range(len(self.path_weakrefs)):
            for output_index in range(len(self.path_weakrefs[depth])):
                if is_live(self.path_weakrefs[depth][output_index]):
                    self.live_indices_after_graph.append((depth, output_index))
        self.debug_check_invariants_after_invocation()
        if config.triton.slow_path_cudagraph_asserts:
            check_memory_pool(self.device, self.npu_graphs_pool,
                              list(self.path_live_weakrefs()) + _owned_output_refs(self.npu_graphs_pool))
        return outputs

    def _own_fresh_outputs(self, outputs):
        """Note [Graph-tree outputs own their memory]: keeps the storage of each
        fresh output and puts a non-owning tensor over its memory in its place
        (outputs aliasing one storage share one alias)."""
        aliases = {}  # data_ptr of an owned storage -> its non-owning alias
        result = list(outputs)
        for i, o in enumerate(outputs):
            info = self.output_storage_alias[i]
            if not isinstance(o, torch.Tensor) or self.static_output_tensors[i] is not None:
                continue
            if info is not UnaliasedStorage and not isinstance(info, _trees.AliasesNewOutput):
                continue
            storage = o.untyped_storage()
            alias = aliases.get(storage.data_ptr())
            if alias is None:
                self.owned_output_storages.append(storage)
                alias = aliases[storage.data_ptr()] = _storage_alias(storage)
            result[i] = self._reconstruct_from_tensor_metadata(self._tensor_metadata(o, ignore_storage_offset=False),
                                                               storage=alias)
        return result

    def _initialize_cached_tensors(self):
        _check(len(self.outputs_weakrefs) == len(self.outputs_metadata),
               "len(self.outputs_weakrefs) == len(self.outputs_metadata)")
        for i, (storage_info, metadata, make_cached) in enumerate(
                zip(self.output_storage_alias, self.outputs_metadata, self.unaliased_in_all_paths)):
            if not make_cached:
                self.cached_tensor_outputs.append(None)
                continue
            _check(storage_info is UnaliasedStorage, "storage_info is UnaliasedStorage")
            _check(isinstance(metadata, dict), "isinstance(metadata, dict)")
            s = self.create_storage(metadata)
            out = self._reconstruct_from_tensor_metadata(metadata, storage=s)
            # Autograd must not steal this tensor's buffer for an in-place
            # gradient accumulation: the node holds a reference it ignores.
            torch_npu._C._add_cached_tensor(out)
            self_ref = weakref.ref(self)

            def check_refcount(i):
                self_loc = self_ref()
                if self_loc is None:
                    return False
                refcount = self_loc.get_output_refcount(i)
                if self_loc.cached_tensor_outputs[i]._use_count() > 1:
                    return refcount == 3
                return refcount == 2

            check = functools.partial(check_refcount, i=i)
            self.outputs_weakrefs[i] = StorageWeakRefWrapper(out, extra_ref_check=check)
            self.cached_tensor_outputs.append(out)

    @staticmethod
    def _get_liveness(weakrefs):
        if len(weakrefs) == 0:
            return []
        return [[is_live(ref) for ref in outputs] for outputs in weakrefs]

    def debug_assert_invariants(self, expected_liveness, newly_dead):
        if not config.triton.fast_path_cudagraph_asserts:
            return
        for i, node in enumerate(self._path_from_root):
            _check(self.path_weakrefs[i] is node.outputs_weakrefs, "self.path_weakrefs[i] is node.outputs_weakrefs")
        nodes = list(self._path_from_root)
        live_blocks = get_block_addrs(self.npu_graphs_pool)
        live_storage_data_ptrs = OrderedSet()
        live_storage_weak_ptrs = OrderedSet()
        for depth, outputs_liveness in enumerate(expected_liveness):
            for output_idx, output_liveness in enumerate(outputs_liveness):
                # An output can die early, never live past its expected death.
                w = self.path_weakrefs[depth][output_idx]
                stor_weak_ptr_and_data_ptr = maybe_deref(w)
                if stor_weak_ptr_and_data_ptr is None:
                    continue
                _check(output_liveness, "output_liveness")
                stor_weak_ptr, stor_data_ptr = stor_weak_ptr_and_data_ptr
                _check((stor_data_ptr in live_storage_data_ptrs) == (stor_weak_ptr in live_storage_weak_ptrs),
                       "(stor_data_ptr in live_storage_data_ptrs) == (stor_weak_ptr in live_storage_weak_ptrs)")
                live_storage_data_ptrs.add(stor_data_ptr)
                live_storage_weak_ptrs.add(stor_weak_ptr)
                if nodes[depth].static_output_tensors[output_idx] is not None:
                    _check(stor_data_ptr not in live_blocks, "stor_data_ptr not in live_blocks")
        for depth, output_index in newly_dead:
            _check(not is_live(self.path_weakrefs[depth][output_index]),
                   "not is_live(self.path_weakrefs[depth][output_index])")

    @staticmethod
    def _tensor_metadata(x, ignore_storage_offset=True):
        """torch's metadata of ``x``, and its npu format when that is a private
        one (FRACTAL_NZ, ...), which tensors made over the same memory
        would not have."""
        metadata = _trees.CUDAGraphNode._tensor_metadata(x, ignore_storage_offset)
        if _is_npu(x):
            npu_format = torch.ops.npu.get_npu_format(x)
            if npu_format not in _BASE_FORMATS:
                metadata["npu_format"] = npu_format
        return metadata

    def _reconstruct_from_tensor_metadata(self, metadata, storage=None):
        s = self.create_storage(metadata) if storage is None else storage
        return torch_npu._C._construct_NPU_Tensor_From_Storage_And_Metadata(metadata, s)

    def create_storage(self, metadata):
        return torch_npu._C._construct_storage_from_data_pointer(metadata["data_ptr"], metadata["device"],
                                                                 metadata["nbytes"])

    def _allocate_and_copy_recording_inputs(self, inputs):
        """Copies the inputs that are neither static nor the pool's into new
        tensors in the pool, which replays copy later inputs into."""
        torch.npu.synchronize()
        self.stream.wait_stream(torch.npu.current_stream())
        recording_inputs = []
        with warnings.catch_warnings(record=True), torch.npu.device(self.device), \
                _use_npu_memory_pool_manager(self.device, mem_pool=self.npu_graphs_pool, stream=self.stream):
            for i, inp in enumerate(inputs):
                if not isinstance(inp, torch.Tensor):
                    _check(isinstance(inp, (int, torch.Generator, OpaqueBase)),
                           "isinstance(inp, (int, torch.Generator, OpaqueBase))")
                    recording_inputs.append(inp)
                elif i not in self.static_input_idxs:
                    recording_inputs.append(static_input(inp))  # allocates, in the pool
                else:
                    recording_inputs.append(inp)
            self._copy_inputs_and_remove_from_src(recording_inputs, inputs)
        return recording_inputs

    def check_invariants(self, inputs):
        """Whether this node can replay for ``inputs``: the pool's tensors and
        the static inputs at their recorded addresses, the outputs that died
        before the recording dead again. Returns (status, a function giving
        the reason), as torch's node does."""
        def reason(idxs, status):
            return lambda: log_data_ptr_mismatch(self.wrapped_function.placeholders, inputs,
                                                 self.static_input_data_ptrs, idxs, status)

        if not torch_npu._C._tensors_data_ptrs_at_indices_equal(inputs, self.static_input_data_ptrs,
                                                                 self.npugraph_managed_idxs):
            status = CheckInvariantStatus.CudagraphManagedIdxMismatch
            return status, reason(self.npugraph_managed_idxs, status)
        if not self._check_liveness(self.expected_dead_indices_before_graph, self.path_weakrefs):
            status = CheckInvariantStatus.ExpectedDeadIndicesBeforeGraphMismatch
            return status, lambda: f"{status}"
        if self.rerecord_if_static_inputs_change and not torch_npu._C._tensors_data_ptrs_at_indices_equal(
                inputs, self.static_input_data_ptrs, self.tensor_static_input_idxs):
            status = CheckInvariantStatus.StaticInputIdxMismatch
            return status, reason(self.tensor_static_input_idxs, status)
        # The pool's inputs that died during the recording must die now, before
        # the replay writes over their memory.
        for idx in self.npugraph_managed_idxs:
            if not self.preserved_aliased_inputs[idx]:
                inputs[idx] = None
        torch._check(
            self._check_liveness(self.expected_dead_indices_after_graph, self.path_weakrefs),
            lambda: "TODO: graph recording observed an input tensor deallocate during graph "
                    " recording that did not occur during replay. Please file an issue.",
        )
        return CheckInvariantStatus.SUCCESS, lambda: f"{CheckInvariantStatus.SUCCESS}"


def get_npugraph_segments(pool_id):
    """The segments of memory pool ``pool_id``."""
    segments = torch.npu.memory_snapshot()
    return [segment for segment in segments if tuple(segment["segment_pool_id"]) == tuple(pool_id)]


def get_block_addrs(pool_id, live_only=True):
    """The addresses of the blocks of ``pool_id`` (only the allocated ones if ``live_only``)."""
    return [addr for addr, block in blocks_by_address(get_npugraph_segments(pool_id))
            if block["state"] == "active_allocated" or not live_only]


def check_memory_pool(device, pool_id, live_storages_ptrs):
    """Raises unless the blocks allocated in ``pool_id`` are exactly the memory
    of ``live_storages_ptrs`` (StorageWeakRefWrappers)."""
    if not all(isinstance(elem, StorageWeakRefWrapper) for elem in live_storages_ptrs):
        raise RuntimeError("check all(isinstance(elem, StorageWeakRefWrapper) for elem in live_storages_ptrs) fail")
    unique_storages = {stor.data_ptr() for stor in live_storages_ptrs if stor()}
    # The snapshot is slow: only taken once the fast check failed.
    if torch_npu._C._npu_checkPoolLiveAllocations(device, pool_id, unique_storages):
        return
    # A dead tensor not yet collected would look like a leak.
    gc.collect()
    torch.npu.synchronize()
    allocated_not_in_live_storages = {}
    for addr, block in blocks_by_address(get_npugraph_segments(pool_id)):
        if block["state"] == "active_allocated":
            if addr not in unique_storages:
                allocated_not_in_live_storages[addr] = block
            else:
                unique_storages.remove(addr)
    torch._check(
        len(unique_storages) == 0,
        lambda: f"These storage data ptrs are not allocated in pool {pool_id} but should be {unique_storages}",
    )
    if allocated_not_in_live_storages:
        formatted = []
        for dp, block in allocated_not_in_live_storages.items():
            trace = format_tb(block.get("frames", []))
            formatted.append(f"Data Pointer: {dp}, history: \n{trace}")
        formatted_s = "\n".join(formatted)
        raise RuntimeError(
            f"These live storage data ptrs are in the npugraph pool but not accounted for as an output of "
            f"npu graph: \n\n{formatted_s}")


def _is_capture_refusal(error):
    # vNPU's words for work that cannot be captured (a CPU fallback, a host
    # copy, a wait for the device), as CUDA's cudaErrorStreamCaptureUnsupported.
    return "stream is capturing" in str(error)


class NPUGraphTreeManager(_trees.CUDAGraphTreeManager):
    """The NPU graph tree of one device: records functions into graphs that
    share one memory pool, checks on each call which recorded graph may
    replay, and warms functions up (torch's tree manager, whose decisions,
    ``_run``, are inherited as they are)."""

    def __init__(self, device_index):
        self.roots = defaultdict(list)
        self.ids_to_funcs = {}
        self.ids_to_stack_traces = {}
        self.warmed_up_functions = OrderedSet()
        # Functions warned about for being recorded again while their earlier
        # outputs were alive (pending backwards), once each.
        self.warned_functions = OrderedSet()
        self.warned_mutation = OrderedSet()
        # Functions whose capture vNPU refused: they run without NPU graphs.
        self.uncapturable_functions = {}
        torch._C._set_cached_tensors_enabled(True)
        # One stream for every allocation to the pool: the caching allocator
        # hands a block out again only on the stream that freed it.
        with graph_capture_lock, torch.npu.device(device_index):
            torch.npu.synchronize()
            self.stream = torch.npu.Stream()
            self.stream.wait_stream(torch.npu.current_stream())
            # A graph that is never replayed keeps the pool alive. It holds
            # one small task: vNPU warns about an empty capture from C++, out
            # of reach of catch_warnings (torch captures nothing here).
            self.graph = torch.npu.NPUGraph()
            self.npu_graphs_thread_pool = torch.npu.graph_pool_handle()
            with warnings.catch_warnings(record=True), torch.npu.graph(
                    self.graph, pool=self.npu_graphs_thread_pool, stream=self.stream,
                    capture_error_mode="thread_local"):
                torch.zeros(1, device=torch.device("npu", device_index))
        self.graph_counter = itertools.count(0)
        self.func_counter = itertools.count(0)
        # (parent node id, function id) -> whether the function mutates inputs
        # that are neither static nor the pool's (then it runs eagerly).
        self.non_cudagraph_managed_mutation_hint = defaultdict(dict)
        self.warmup_node_counter = itertools.count(start=-1, step=-1)
        self.num_rerecord = defaultdict(lambda: defaultdict(lambda: 0))
        self.path_state = ExecutionState.NONE
        self.device_index = device_index
        self.current_node = None
        self.current_gen = -1
        self.debug_fail_counter = 0
        self.debug_checkpointing_counter = 0
        self.id_to_mode = {}
        self.id_to_compile_id = {}
        self.compile_id = None
        # Note [Backward Generation Handling] in torch's cudagraph_trees.
        self.running_forwards_with_pending_backwards = False
        self.mode = None
        self.disable_invalidate_aliases = False

    def run(self, new_inputs, function_id):
        if self.graph is None:
            raise RuntimeError("Running NPUGraph after shutdown")
        self.mode = self.id_to_mode[function_id]
        self.compile_id = self.id_to_compile_id.get(function_id)
        if function_id in self.uncapturable_functions:
            out = self.ids_to_funcs[function_id].model(new_inputs)
        else:
            out = self._run(new_inputs, function_id)
        # The forwards are only pending following invocation, not before.
        if self.mode == CompilationMode.FORWARD:
            self.running_forwards_with_pending_backwards = True
        elif self.mode == CompilationMode.BACKWARD:
            self.running_forwards_with_pending_backwards = False
        return out

    def record_function(self, new_inputs, function_id):
        _check(not isinstance(self.current_node, NPUWarmupNode), "not isinstance(self.current_node, NPUWarmupNode)")
        with torch._dynamo.callback_handler.install_callbacks(CallbackTrigger.CUDAGRAPH_RECORDING,
                                                              str(self.compile_id)):
            graph_id = self.new_graph_id()
            log.debug("NPUGRAPH-TREE Node Record function=%d, graph=%d", function_id.id, graph_id.id)
            torch.npu.synchronize()
            # Kept only while recording: a refused capture runs the function on them.
            inputs = list(new_inputs)
            try:
                node = NPUGraphNode(self.ids_to_funcs[function_id], graph_id, self.current_node, new_inputs,
                                    self.npu_graphs_thread_pool, self.device_index,
                                    self.ids_to_stack_traces[function_id], self.stream)
            except RuntimeError as e:
                if not _is_capture_refusal(e):
                    raise
                return self._run_without_graphs(function_id, inputs, e)
            del inputs
            if self.current_node is None:
                self.roots[function_id].append(node)
            else:
                self.current_node.add_child(function_id, node)
            self.current_node = node
            self.path_state = ExecutionState.RECORDING
            self.update_generation()
            torch.npu.synchronize()
            return node.run_first_inputs(new_inputs)

    def _run_without_graphs(self, function_id, inputs, error):
        reason = str(error).splitlines()[0]
        self.uncapturable_functions[function_id] = reason
        warnings.warn(f"torch_npu: skipping NPU graphs for {self.get_func_name(function_id)}: {reason}; "
                      "it runs without NPU graphs")
        return self.ids_to_funcs[function_id].model(inputs)

    def run_eager(self, new_inputs, function_id):
        already_warm = function_id in self.warmed_up_functions
        self.warmed_up_functions.add(function_id)
        node = NPUWarmupNode(self.ids_to_funcs[function_id], self.current_node, self.npu_graphs_thread_pool,
                             self.graph, self.device_index, self.ids_to_stack_traces[function_id], self.stream,
                             already_warm, self.new_warmup_node_id())
        self.current_node = node
        self.path_state = ExecutionState.WARMUP
        self.update_generation()
        return node.run(new_inputs)

    def add_function(self, model, inputs, static_input_idxs, stack_traces, mode, constants, placeholders,
                     mutated_input_idxs, compile_id=None):
        function_id = self.new_func_id()
        self.ids_to_stack_traces[function_id] = stack_traces
        self.ids_to_funcs[function_id] = WrappedFunction(
            model, list(static_input_idxs), function_id, tuple(t for t in constants if _is_npu(t)), placeholders,
            mutated_input_idxs)
        self.id_to_mode[function_id] = mode
        self.id_to_compile_id[function_id] = compile_id
        fn = functools.partial(self.run, function_id=function_id)
        # The container drops the manager once no function uses it.
        get_container(self.device_index).add_strong_reference(fn)
        return fn, fn(inputs)

    @staticmethod
    def get_curr_generation():
        if MarkStepBox.mark_step_counter != 0:
            return MarkStepBox.mark_step_counter
        return GenerationTracker.generation

    @staticmethod
    def user_invoked_mark_step():
        return MarkStepBox.mark_step_counter != 0

    def try_end_curr_execution(self):
        """As torch's, but outputs of the previous generation that are still
        held move out of the pool first (Note [Graph-tree outputs own their
        memory]): CUDA's next replay would overwrite them."""
        _check(not self.in_recording, "not self.in_recording")
        if self.current_node is None:
            return
        if self.can_start_new_generation():
            self._detach_current_path_outputs()
            self.clear_current_path_state_and_set_to_none()
            return
        if self.current_node.all_outputs_are_dead():
            self.clear_current_path_state_and_set_to_none()

    def check_warn_on_unable_to_start_executing(self, function_id):
        """Warns (once per function) when a function keeps being recorded
        again because outputs of its earlier calls wait for a backward."""
        if function_id in self.warned_functions or not self.in_new_torch_compile_invocation():
            return
        _check(self.current_node is not None, "self.current_node is not None")
        existing_nodes = [node for node in self.current_node._path_from_root
                          if node.wrapped_function.id == function_id]
        if len(existing_nodes) <= 1:
            return
        parents = OrderedSet([n.parent.wrapped_function.id
                              for n in itertools.chain(existing_nodes, (self.current_node,))
                              if n.parent is not None])
        if len(parents) == len(existing_nodes):
            return
        self.warned_functions.add(function_id)
        warnings.warn(
            "Unable to hit fast path of NPUGraphs because of pending, uninvoked backwards. "
            "Consider running with torch.no_grad() or using torch.compiler.npugraph_mark_step_begin() "
            "before each model invocation"
        )

    @staticmethod
    def format_dealloc_msg(stack_trace, *, is_grad_output=False):
        stack_trace = stack_trace.strip() if stack_trace else "[Could not find stack trace]"
        return ("Error: accessing tensor output of NPUGraphs that has been overwritten by a subsequent run. "
                f"Stack trace: {stack_trace}. "
                "To prevent overwriting, clone the tensor outside of torch.compile() "
                "or call torch.compiler.npugraph_mark_step_begin() before each model invocation.")

    def dealloc_current_path_weakrefs(self):
        """A new generation starts while the current path's outputs may be held:
        CUDA frees them and makes them raise; here they move out of the pool
        with their values (Note [Graph-tree outputs own their memory])."""
        _check(self.current_node is not None, "self.current_node is not None")
        self._detach_current_path_outputs()

    def _detach_current_path_outputs(self):
        # Warm-up outputs too: they own pool blocks that graphs recorded
        # earlier used for intermediates, which their replays overwrite.
        for node in self.current_node._path_from_root:
            _detach_live_outputs(node)

    def apply_checkpoint_execution_state_in_allocator(self):
        """CUDA restores the pool to the state after the current node before
        recording or warming up past a replay. The pool already counts every
        recorded output as allocated (Note [Graph-tree outputs own their
        memory]): nothing to restore."""
        _check(isinstance(self.current_node, NPUGraphNode), "isinstance(self.current_node, NPUGraphNode)")
        self.debug_checkpointing_counter += 1

    def live_npugraph_pool_storages_in_curr_execution(self):
        return self.live_cudagraph_pool_storages_in_curr_execution()

    def node_count(self):
        """How many graphs the tree holds."""
        return sum(1 + node.num_descendants() for node in self.get_roots()) if self.roots is not None else 0
