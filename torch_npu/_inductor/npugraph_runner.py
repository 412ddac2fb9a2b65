"""Replaying compiled graphs as NPU graphs: torchair's "reduce-overhead" and
"npugraph_ex" modes and the "npugraphs" dynamo backend (what Inductor's
cudagraphify is for CUDA).

``NpuGraphRunner`` wraps one compiled (or eager FX) graph with boxed inputs.
Per input signature (shapes, strides, dtypes, and the values of non-tensor
inputs, which captured kernels bake in) it

1. runs the graph normally on the first call (warm-up: first launches check
   their arguments, lazy state gets built);
2. on the second call, captures it into a ``torch.npu.NPUGraph``: inputs
   that keep their address from call to call (parameters and buffers:
   Inductor's ``static_input_idxs``, or ``nn.Parameter`` s) are used in
   place, the others are copied into static buffers of the graph;
3. from then on copies the non-static inputs into those buffers and replays.

Outputs are returned as fresh tensors (one device copy each): the graph's
static outputs are overwritten by the next replay, while callers (and
AOTAutograd's saved activations) may keep results across calls.

Graphs that cannot be captured (a CPU fallback, a host copy, a sync inside)
or that mutate a non-static input run without NPU graphs from then on, with
one warning naming the reason, as Inductor does when it skips cudagraphs.

Compiled graphs whose wrapper wrote an ACLGraph update plan (their extern
kernels call operators with NpuGraph handlers: Note [Update plans in
compiled NPU graph replays]) are captured with ``auto_dispatch_capture``,
and each replay first updates the captured operators from the call's inputs.

torchair's modes use it; Inductor's ``mode="reduce-overhead"`` and the
"npugraphs" backend use the NPU graph trees instead
(torch_npu/npu/_graph_tree.py), whose replays share one pool and overwrite
the previous generation's outputs, as CUDA graph trees do. A runner that
recorded a graph is held (weakly) here: ``torch.compiler.reset()`` drops its
recordings (``reset_runners``), and the runner starts over at its next call.
"""

import functools
import warnings
import weakref

import torch

__all__ = ["NpuGraphRunner", "npugraph_inner_compile"]

_recording_runners = weakref.WeakSet()


def reset_runners():
    """Drops the recordings of every runner (``torch.compiler.reset()``)."""
    for runner in list(_recording_runners):
        runner.reset()
    _recording_runners.clear()


def recorded_graph_count():
    return sum(runner.graph_count() for runner in list(_recording_runners))


def _signature(args, updated_ints=frozenset()):
    key = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            key.append((tuple(a.shape), tuple(a.stride()), a.dtype, a.device))
        elif i in updated_ints:
            key.append("updated by the plan")
        else:
            key.append(("value", a))
    return tuple(key)


# Note [Update plans in compiled NPU graph replays]
# A non-tensor input is baked into the kernels captured with it, so each of
# its values normally gets a recording of its own. An ACLGraph update plan
# (torch_npu/_inductor/_aclgraph_update_plan) lets a replay change host
# arguments of the operators captured with NpuGraph handlers (sequence
# lengths): the graph is captured with auto_dispatch_capture, and before each
# replay the plan is resolved against the call's inputs and the captured
# operators are re-recorded with the values (NPUGraph.update). An int input
# the graph uses only as such arguments (found in the FX graph at compile
# time: ``ints_only_updated``) then leaves the signature: a new sequence
# length replays the recording with an update instead of recording again.
# Any other use (a size, a loop bound, arithmetic) keeps it in the signature.
# After a replay the update stream waits for the replay's stream, so the next
# update cannot swap a captured call's work while this replay still has it to run.
def ints_only_updated(gm, example_inputs):
    """Indices of the SymInt inputs of ``gm`` whose every use is as (an item
    of) an argument that an NpuGraph handler's update replaces."""
    import sympy

    from torch_npu._inductor._aclgraph_update_plan.codegen import _arguments_by_name, _npugraph_handler
    from torch_npu.npu._aclgraph_update_plan.resolver import _handler_update_keys

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return frozenset()
    shape_symbols = set()
    for example in example_inputs:
        if isinstance(example, torch.Tensor):
            for size in (*example.shape, *example.stride(), example.storage_offset()):
                if isinstance(size, torch.SymInt):
                    shape_symbols |= size.node.expr.free_symbols

    def only_updated_by(user, node):
        target = user.target
        handler = _npugraph_handler(getattr(target, "__name__", "")) if user.op == "call_function" else None
        if handler is None:
            return False
        update_keys = _handler_update_keys(handler, target.__name__)
        bound = _arguments_by_name(target, user.args, user.kwargs)
        in_updates = sum(_flat(bound[key]).count(node) for key in update_keys if key in bound)
        return in_updates > 0 and in_updates == _flat([user.args, user.kwargs]).count(node)

    symbols = [e.node.expr if isinstance(e, torch.SymInt) else None for e in example_inputs]
    found = set()
    for i, (node, expr) in enumerate(zip(placeholders, symbols)):
        if not isinstance(expr, sympy.Symbol) or expr in shape_symbols or symbols.count(expr) > 1:
            continue
        if node.users and all(only_updated_by(user, node) for user in node.users):
            found.add(i)
    return frozenset(found)


def _flat(value):
    if isinstance(value, (list, tuple)):
        return [item for v in value for item in _flat(v)]
    if isinstance(value, dict):
        return [item for v in value.values() for item in _flat(v)]
    return [value]


def _update_plan_of(compiled):
    """The plan the wrapper of ``compiled`` wrote on its launcher, or []."""
    from torch_npu.npu._aclgraph_update_plan import ACLGRAPH_UPDATE_PLAN_GLOBAL

    for holder in (compiled, getattr(compiled, "current_callable", None)):
        plan = getattr(holder, ACLGRAPH_UPDATE_PLAN_GLOBAL, None)
        if plan:
            return list(plan)
    return []


class _Recorded:
    """One captured graph: its static inputs and outputs."""

    def __init__(self, graph, static_inputs, outputs, copied):
        self.graph = graph
        self.static_inputs = static_inputs
        self.outputs = outputs
        self.copied = copied  # indices of inputs copied into static buffers


class NpuGraphRunner:
    """A boxed callable (``runner(list_of_inputs)``) replaying ``compiled``."""

    _boxed_call = True

    def __init__(self, compiled, static_input_idxs=(), mutated_input_idxs=(), name="graph", updated_ints=()):
        self.compiled = compiled
        self.update_plan = _update_plan_of(compiled)
        # Int inputs that only the plan reads leave the signature (Note
        # [Update plans in compiled NPU graph replays]).
        plan_inputs = _plan_input_indices(self.update_plan)
        self.updated_ints = frozenset(i for i in updated_ints if i in plan_inputs)
        self.static_input_idxs = frozenset(static_input_idxs)
        self.mutated_input_idxs = frozenset(mutated_input_idxs)
        self.name = name
        self.pool = None
        self.seen = {}  # signature -> input addresses at its warm-up call
        self.demoted = set()  # static by Inductor's account, but their address moves
        self.recorded = {}
        self.disabled_reason = None
        # An instance attribute, so that the wrappers AOTAutograd puts around
        # a compiled graph (functools.wraps copies __dict__) see it too.
        self._boxed_call = True

    def reset(self):
        """Forgets every recording (their graphs and pool are freed once
        no replay holds them) and the reason NPU graphs were skipped."""
        self.pool = None
        self.seen = {}
        self.demoted = set()
        self.recorded = {}
        self.disabled_reason = None

    def graph_count(self):
        return len(self.recorded)

    def _call_compiled(self, args):
        if getattr(self.compiled, "_boxed_call", False):
            return self.compiled(list(args))
        return self.compiled(*args)

    def _disable(self, reason):
        self.disabled_reason = reason
        warnings.warn(f"torch_npu: skipping NPU graphs for {self.name}: {reason}; it runs without NPU graphs")

    def _is_static(self, i, a):
        if i in self.demoted:
            return False
        return i in self.static_input_idxs or isinstance(a, torch.nn.Parameter) or getattr(a, "_is_param", False)

    def _record(self, args):
        npu_tensors = [a for a in args if isinstance(a, torch.Tensor) and a.device.type == "npu"]
        if not npu_tensors or any(isinstance(a, torch.Tensor) and a.device.type != "npu" for a in args):
            self._disable("its inputs are not all npu tensors")
            return None
        mutated_copies = [i for i in self.mutated_input_idxs if not self._is_static(i, args[i])]
        if mutated_copies:
            self._disable(f"it mutates inputs {sorted(mutated_copies)}, which are not static")
            return None
        static_inputs, copied = list(args), []
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and not self._is_static(i, a):
                buf = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
                buf.copy_(a)
                static_inputs[i] = buf
                copied.append(i)
        if self.pool is None:
            self.pool = torch.npu.graph_pool_handle()
        graph = torch.npu.NPUGraph()
        try:
            with torch.npu.graph(graph, pool=self.pool, auto_dispatch_capture=bool(self.update_plan)):
                outputs = self._call_compiled(static_inputs)
        except RuntimeError as e:
            if "stream is capturing" not in str(e):
                raise
            self._disable(str(e).splitlines()[0])
            return None
        if self.update_plan:
            from torch_npu.npu._aclgraph_update_plan import validate_aclgraph_update_plan_for_graph
            validate_aclgraph_update_plan_for_graph(self.update_plan, graph)
        _recording_runners.add(self)
        return _Recorded(graph, static_inputs, outputs, copied)

    def _update(self, recorded, args):
        """Updates the captured operators from this call's inputs (tensor
        inputs by their static buffers, which the graph reads)."""
        if not self.update_plan:
            return False
        from torch_npu.npu._aclgraph_update_plan import (
            resolve_aclgraph_update_plan,
            update_aclgraph_records_for_graph,
        )
        inputs = [recorded.static_inputs[i] if i in recorded.copied else a for i, a in enumerate(args)]
        return update_aclgraph_records_for_graph(resolve_aclgraph_update_plan(self.update_plan, inputs),
                                                 recorded.graph)

    def __call__(self, *call_args):
        # Boxed (one list, which the callee may clear) or plain arguments: the
        # callers of compiled graphs use both, depending on their wrappers.
        boxed = len(call_args) == 1 and isinstance(call_args[0], list)
        args = call_args[0] if boxed else list(call_args)
        if self.disabled_reason is not None:
            return self._call_compiled(args)
        key = _signature(args, self.updated_ints)
        recorded = self.recorded.get(key)
        if recorded is None:
            if key not in self.seen:
                self.seen[key] = [a.data_ptr() if isinstance(a, torch.Tensor) else None for a in args]
                return self._call_compiled(args)
            # Inputs Inductor calls static whose address changed since the
            # warm-up (a backward's saved activations: this runner's outputs
            # are fresh tensors each call) are copied like the others.
            for i, (a, then) in enumerate(zip(args, self.seen[key])):
                if isinstance(a, torch.Tensor) and a.data_ptr() != then:
                    self.demoted.add(i)
            recorded = self._record(args)
            if recorded is None:
                return self._call_compiled(args)
            self.recorded[key] = recorded
        else:
            for i in recorded.copied:
                recorded.static_inputs[i].copy_(args[i])
            for i, a in enumerate(args):
                if i not in recorded.copied and isinstance(a, torch.Tensor) and \
                        a.data_ptr() != recorded.static_inputs[i].data_ptr():
                    # A static input moved (a parameter was replaced): record again.
                    del self.recorded[key]
                    self.demoted.add(i)
                    return self(args)
        updated = self._update(recorded, args)
        if hasattr(args, "clear"):
            args.clear()  # boxed convention: the callee frees its inputs
        recorded.graph.replay()
        if updated:
            recorded.graph.graph_dispatch_mode.update_stream.wait_stream(torch.npu.current_stream())
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in recorded.outputs]


def _plan_input_indices(plan):
    def indices(source):
        if not isinstance(source, dict):
            return set()
        if source.get("kind") == "input":
            return {source.get("index")}
        if source.get("kind") == "list":
            return set().union(*(indices(item) for item in source.get("items") or []))
        return set()
    return set().union(*(indices(source) for entry in plan for source in (entry.get("updates") or {}).values()))


def npugraph_inner_compile(inner):
    """Wraps Inductor's compile_fx_inner so each compiled graph (forward and
    backward) replays as an NPU graph."""

    @functools.wraps(inner)
    def compile_inner(gm, example_inputs, *args, **kwargs):
        from torch_npu._inductor._aclgraph_update_plan.codegen import generating_for_npu_graphs
        with generating_for_npu_graphs():
            compiled = inner(gm, example_inputs, *args, **kwargs)
        static = kwargs.get("static_input_idxs") or ()
        mutated = getattr(compiled, "mutated_input_idxs", ()) or ()
        name = "backward graph" if kwargs.get("is_backward") else "graph"
        return NpuGraphRunner(compiled, static, mutated, name=name, updated_ints=ints_only_updated(gm, example_inputs))

    return compile_inner
