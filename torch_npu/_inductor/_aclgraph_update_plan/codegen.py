"""Inductor's side of ACLGraph update plans: the wrapper code generation
records, for each extern kernel it calls, where the arguments that a replay
may update come from.

Only operators with an NpuGraph handler (torch_npu/npu/_npugraph_handlers)
take part, and of their arguments only those the handler's update specs name
(sequence lengths, in practice). Each such argument becomes a source:

- one of the compiled graph's inputs -> ``{"kind": "input", "index": i}``;
  an input is recognised by its buffer name, or for a SymInt by its
  expression;
- a Python literal or None -> a constant / ``{"kind": "none"}``;
- a list or tuple -> ``{"kind": "list", "items": [...]}`` of its items.

Anything else (a tensor made inside the graph, an expression computed from
the inputs) cannot be updated by a replay and is refused at compile time.

When the wrapper is finished it writes the collected plan onto the function
behind its launcher ``call`` (``call`` may be a bound method)::

    call._torch_npu_aclgraph_update_plan = [{"op": ..., "updates": {...}}]

and the replay (NpuGraphRunner) checks and resolves that plan against each
call's inputs (torch_npu/npu/_aclgraph_update_plan). The plan lists the
kernels in the order the wrapper calls them, which is the order an automatic
capture records them.
"""

import contextlib
import threading

import sympy
import torch

from torch_npu.npu._aclgraph_update_plan import resolver
from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = [
    "append_inductor_aclgraph_update_plan_for_codegen_node",
    "build_aclgraph_update_plan_entry_for_inductor",
    "emit_inductor_aclgraph_update_plan_for_wrapper",
    "generating_for_npu_graphs",
    "should_generate_inductor_aclgraph_update_plan",
]

# Operator -> layouts in which its call takes no sequence lengths: the
# runtime handler captures such a call without an update, so an entry for it
# would name arguments the captured call never reads.
_NO_UPDATE_LAYOUTS = {
    "npu_fusion_attention_v3": frozenset({"BNSD"}),
    "npu_fusion_attention_grad_v3": frozenset({"BNSD"}),
}

# How many wrappers (TensorBox -> StorageBox -> view -> ...) _buffer_name
# looks through before it gives up.
_MAX_IR_NESTING = 8

_SYMBOLIC_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)

_per_thread = threading.local()


# ---------------------------------------------------------------------------
# The wrapper's hooks
# ---------------------------------------------------------------------------

def append_inductor_aclgraph_update_plan_for_codegen_node(wrapper, node) -> None:
    """Called as ``wrapper`` generates the extern kernel ``node``: adds the
    node's entry, if it has one, to the plan the wrapper collects (its
    ``torch_npu_aclgraph_update_plan``)."""
    target = getattr(node, "op_overload", None)
    if target is None or not should_generate_inductor_aclgraph_update_plan():
        return
    args, kwargs = _operator_arguments(node)
    entry = build_aclgraph_update_plan_entry_for_inductor(
        target, args, kwargs, wrapper.get_graph_input_names(), wrapper.get_graph_inputs())
    if entry is None:
        return
    if getattr(wrapper, "torch_npu_aclgraph_update_plan", None) is None:
        wrapper.torch_npu_aclgraph_update_plan = []
    wrapper.torch_npu_aclgraph_update_plan.append(entry)


def emit_inductor_aclgraph_update_plan_for_wrapper(wrapper, result, is_graph_partition_subgraph: bool) -> None:
    """Writes the collected plan into ``result`` (the generated module) as an
    attribute of the launcher, where the replay looks for it.

    With graph partitions, each partition's launcher carries its own plan, as
    the partitions are replayed one by one; the whole graph's wrapper then
    writes none. With graph_partition on but no partition made, ``call`` is
    the bound method of the module's Runner: the attribute goes on the
    method's function, which attribute lookup on the method reaches."""
    collected = getattr(wrapper, "torch_npu_aclgraph_update_plan", None)
    if not collected or not should_generate_inductor_aclgraph_update_plan():
        return
    if _left_to_partitions(wrapper, is_graph_partition_subgraph):
        return
    fn = wrapper.launcher_fn_name
    attribute = resolver.ACLGRAPH_UPDATE_PLAN_GLOBAL
    result.writeline(f"setattr(getattr({fn}, '__func__', {fn}), {attribute!r}, {collected!r})")
    if is_graph_partition_subgraph:
        # A plan's inputs are the partition's arguments: named, so that the
        # graph's integer inputs the plan alone reads (retarget.py's
        # updated_int_names) are found among them, symbols included.
        names = list(wrapper.get_graph_input_names())
        result.writeline(f"setattr({fn}, {PARTITION_ARGUMENT_NAMES!r}, {names!r})")


PARTITION_ARGUMENT_NAMES = "_torch_npu_argument_names"


def _left_to_partitions(wrapper, is_graph_partition_subgraph):
    from torch._inductor import config as inductor_config

    if is_graph_partition_subgraph or not inductor_config.graph_partition:
        return False
    return bool(getattr(wrapper, "all_partition_names", None))


def _operator_arguments(node):
    """(args, kwargs) of an extern kernel node as its operator takes them,
    rather than as the node stores them."""
    unflatten = getattr(node, "unflatten_args", None)
    if unflatten is not None:
        return unflatten(node.inputs, node.constant_args)
    return list(node.inputs) + list(node.constant_args), dict(getattr(node, "kwargs", None) or {})


# ---------------------------------------------------------------------------
# When a plan is written
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def generating_for_npu_graphs():
    """Within this, Inductor compiles graphs that NpuGraphRunner will replay,
    and their wrappers write update plans."""
    was_on = getattr(_per_thread, "npu_graphs", False)
    # The plan is part of the generated code, so such a compilation must not
    # share a cache entry with one made without it.
    tag = torch.compiler.config.cache_key_tag + "|torch_npu:aclgraph-update-plan"
    _per_thread.npu_graphs = True
    try:
        with torch.compiler.config.patch(cache_key_tag=tag):
            yield
    finally:
        _per_thread.npu_graphs = was_on


def should_generate_inductor_aclgraph_update_plan() -> bool:
    """Whether the wrapper being generated writes a plan. It does when its
    graph is compiled for NPU graph replay: by vNPU's runner, or by
    Inductor's cudagraph trees (real torch_npu's graph trees) still enabled
    for this graph."""
    if getattr(_per_thread, "npu_graphs", False):
        return True
    from torch._inductor import config as inductor_config
    from torch._inductor.virtualized import V

    trees_on = inductor_config.triton.cudagraphs and inductor_config.triton.cudagraph_trees
    return bool(trees_on) and getattr(V.graph, "disable_cudagraphs_reason", None) is None


# ---------------------------------------------------------------------------
# One kernel call -> one plan entry
# ---------------------------------------------------------------------------

def build_aclgraph_update_plan_entry_for_inductor(op_overload, args, kwargs, graph_input_names, graph_inputs):
    """The plan entry (a dict, or None) of the extern kernel call
    ``op_overload(*args, **kwargs)``, its arguments Inductor's IR values;
    ``graph_input_names`` are the compiled graph's inputs in order and
    ``graph_inputs`` maps each name to its IR value.

    None when the call has nothing to update: its operator has no handler,
    the handler's ``should_handle`` turns the call down, its layout takes no
    updates, or it passes none of the handler's update keys."""
    op_name = getattr(op_overload, "__name__", str(op_overload))
    handler = _npugraph_handler(op_name)
    if handler is None or not _handler_takes(handler, op_overload, args, kwargs):
        return None
    passed = _arguments_by_name(op_overload, args, kwargs)
    if passed.get("input_layout") in _NO_UPDATE_LAYOUTS.get(resolver._base_op_name(op_name), ()):
        return None
    wanted = resolver._handler_update_keys(handler, op_name)
    sources = _SourceFinder(graph_input_names, graph_inputs)
    updates = {key: sources.source(value, f"{op_name} argument {key}")
               for key, value in passed.items() if key in wanted}
    return {"op": op_name, "updates": updates} if updates else None


def _npugraph_handler(op_name):
    """The NpuGraph handler class registered for ``op_name``, or None."""
    # Importing the package registers the built-in handlers.
    from torch_npu.npu._npugraph_handlers import npugraph_handler

    return npugraph_handler._NPU_GRAPH_OP_HANDLERS.get(op_name)


def _handler_takes(handler, op_overload, args, kwargs):
    # A handler may turn down some calls of its operator (should_handle is optional).
    should_handle = getattr(handler, "should_handle", None)
    return should_handle is None or should_handle(op_overload, args, kwargs)


def _arguments_by_name(target, args, kwargs):
    """The call's arguments keyed by the names in ``target``'s schema (an
    argument neither passed nor defaulted here is absent); {} when
    ``target`` has no schema."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return {}
    names = [argument.name for argument in schema.arguments]
    by_name = dict(zip(names, args))
    by_name.update((name, kwargs[name]) for name in names[len(args):] if name in kwargs)
    return by_name


class _SourceFinder:
    """Says where a replay finds each argument value of a call anew, among
    the inputs of the graph being compiled."""

    def __init__(self, graph_input_names, graph_inputs):
        self._position_by_name = {}
        for position, name in enumerate(graph_input_names):
            self._position_by_name.setdefault(name, position)
        self._inputs = [(position, graph_inputs[name]) for position, name in enumerate(graph_input_names)
                        if graph_inputs.get(name) is not None]

    def source(self, value, where):
        """The plan source of ``value``; ``where`` names the argument in errors."""
        position = self._input_position(value)
        if position is not None:
            return {"kind": "input", "index": position}
        if isinstance(value, (list, tuple)):
            return {"kind": "list", "items": [self.source(item, where) for item in value]}
        if value is None:
            return {"kind": "none"}
        if isinstance(value, sympy.Integer):
            value = int(value)
        if isinstance(value, (bool, int, float, str)):
            return {"kind": "constant", "value": value}
        raise _not_updatable(value, where)

    def _input_position(self, value):
        """Which graph input ``value`` is: the one of its buffer's name, the
        object itself, or one with an equal symbolic expression."""
        position = self._position_by_name.get(_buffer_name(value))
        if position is not None:
            return position
        expr = _symbolic(value)
        for position, graph_input in self._inputs:
            if graph_input is value:
                return position
            if expr is not None and _same_value(expr, _symbolic(graph_input)):
                return position
        return None


def _not_updatable(value, where):
    """The error for an argument value a replay could not give anew."""
    if isinstance(value, torch.Tensor):
        message = (f"Unsupported ACLGraph update Tensor constant for {where}: Tensor update values must be graph "
                   "inputs. A tensor made inside the compiled code is baked into the graph; pass it to the compiled "
                   "function as an input, or pass the lengths as a list of ints.")
    elif _symbolic(value) is not None:
        message = (f"Unsupported ACLGraph update source for {where}: the expression {_symbolic(value)} is computed "
                   "from the graph's inputs, not one of them, so a replay cannot update it. Pass the value itself "
                   "to the compiled function as an input.")
    else:
        message = (f"Unsupported ACLGraph update source for {where}: {value!r} (of type {type(value).__name__}) "
                   "is neither a graph input nor an int, float, bool, str, None or a list of them.")
    return RuntimeError(message + pta_error(ErrCode.PARAM))


def _buffer_name(value, depth=0):
    """The name of the buffer behind an Inductor IR value: the buffer itself,
    a box around one (``.data``), or a view of one; None for other values."""
    if depth > _MAX_IR_NESTING or isinstance(value, torch.Tensor):
        return None
    name = _ask(value, "get_name")
    if name is not None:
        return name
    inner = getattr(value, "data", None)
    if inner is not None and inner is not value:
        name = _buffer_name(inner, depth + 1)
        if name is not None:
            return name
    base = _ask(value, "unwrap_view")
    return None if base is None else _buffer_name(base, depth + 1)


def _ask(ir_value, method_name):
    """``ir_value.method_name()``, or None where the IR node has no such
    method or cannot answer it."""
    method = getattr(ir_value, method_name, None)
    if not callable(method):
        return None
    try:
        return method()
    except (AttributeError, NotImplementedError):
        return None


def _symbolic(value):
    """The sympy expression behind a SymInt/SymFloat/SymBool (or an
    expression itself); None for anything else."""
    if isinstance(value, _SYMBOLIC_TYPES):
        return value.node.expr
    return value if isinstance(value, sympy.Expr) else None


def _same_value(expr, other):
    """Whether two expressions are provably equal (``other`` may be None)."""
    if other is None:
        return False
    if expr == other:
        return True
    try:
        difference = sympy.simplify(expr - other)
    except (TypeError, ValueError, AttributeError):
        return False
    return difference == 0
