"""Writing ACLGraph update plans from Inductor's code generation.

While the wrapper of a graph that will be replayed as an NPU graph is
generated, each extern kernel whose operator has an NpuGraph handler
(torch_npu/npu/_npugraph_handlers) gets a plan entry: for every argument its
handler's update specs name (sequence lengths, usually), where the value
comes from at run time. An argument that is one of the graph's inputs (a
buffer by name, a SymInt by its expression) becomes that input's index, a
Python literal stays a constant, a list becomes a list of sources. The
wrapper then writes the plan next to its launcher::

    call._torch_npu_aclgraph_update_plan = [{"op": ..., "updates": {...}}]

(set on the function behind ``call``, which may be a bound method)

and the replay (NpuGraphRunner) resolves it against each call's inputs to
update the captured operators before it replays (the plan's format and its
checks: torch_npu/npu/_aclgraph_update_plan).

Entries are in the order the wrapper calls the kernels, which is the order
an automatic capture records them in.
"""

import contextlib
import threading
from typing import Any, Dict, List, Optional, Sequence

import sympy

from torch_npu.npu._aclgraph_update_plan.resolver import (
    ACLGRAPH_UPDATE_PLAN_GLOBAL,
    _get_update_specs,
    _normalize_op_name,
)
from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = [
    "append_inductor_aclgraph_update_plan_for_codegen_node",
    "build_aclgraph_update_plan_entry_for_inductor",
    "emit_inductor_aclgraph_update_plan_for_wrapper",
    "generating_for_npu_graphs",
    "should_generate_inductor_aclgraph_update_plan",
]

# Calls of these operators in these layouts take no sequence lengths, so their
# runtime handlers capture them without an update; their entries would
# name arguments the captured call never consumes.
_LAYOUTS_WITHOUT_UPDATES = {
    "npu_fusion_attention_v3": {"BNSD"},
    "npu_fusion_attention_grad_v3": {"BNSD"},
}

_LITERALS = (int, float, bool, str)

_state = threading.local()


def _plan_error(message: str) -> RuntimeError:
    return RuntimeError(message + pta_error(ErrCode.PARAM))


@contextlib.contextmanager
def generating_for_npu_graphs():
    """Marks the Inductor compilations inside as ones whose compiled graph
    NpuGraphRunner replays, so their wrappers write update plans."""
    import torch

    previous = getattr(_state, "npu_graphs", False)
    _state.npu_graphs = True
    # Their code differs by the plan: a cached compilation without one would
    # leave the replay unable to update (the cache keys them apart).
    tag = f"{torch.compiler.config.cache_key_tag}|torch_npu:aclgraph-update-plan"
    try:
        with torch.compiler.config.patch(cache_key_tag=tag):
            yield
    finally:
        _state.npu_graphs = previous


def should_generate_inductor_aclgraph_update_plan() -> bool:
    """Whether the wrapper being generated writes a plan: its graph is
    compiled for NPU graph replay (vNPU's runner, or Inductor's cudagraph
    trees left on for the graph, as real torch_npu's graph trees use)."""
    if getattr(_state, "npu_graphs", False):
        return True
    from torch._inductor import config
    from torch._inductor.virtualized import V

    return bool(config.triton.cudagraphs and config.triton.cudagraph_trees
                and getattr(V.graph, "disable_cudagraphs_reason", None) is None)


def _handler_for_op(op_name: str) -> Optional[Any]:
    import torch_npu.npu._npugraph_handlers  # noqa: F401  (registers the built-in handlers)
    from torch_npu.npu._npugraph_handlers.npugraph_handler import _NPU_GRAPH_OP_HANDLERS

    return _NPU_GRAPH_OP_HANDLERS.get(op_name)


def _bind_by_schema(target: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """Argument name -> value, positional arguments named by the schema's
    order; {} for a target without a schema."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return {}
    bound = {}
    for position, argument in enumerate(schema.arguments):
        if position < len(args):
            bound[argument.name] = args[position]
        elif argument.name in kwargs:
            bound[argument.name] = kwargs[argument.name]
    return bound


def _is_excluded(op_name: str, bound: Dict[str, Any]) -> bool:
    layouts = _LAYOUTS_WITHOUT_UPDATES.get(_normalize_op_name(op_name))
    return layouts is not None and bound.get("input_layout") in layouts


def _ir_name(value: Any, depth: int = 0) -> Optional[str]:
    """The buffer name of an Inductor IR value (a buffer, a TensorBox or
    StorageBox around one, a view of one); None for anything else."""
    import torch

    if isinstance(value, torch.Tensor) or depth > 8:
        return None
    get_name = getattr(value, "get_name", None)
    if callable(get_name):
        try:
            return get_name()
        except (AttributeError, NotImplementedError):
            pass
    inner = getattr(value, "data", None)
    if inner is not None and inner is not value:
        name = _ir_name(inner, depth + 1)
        if name is not None:
            return name
    unwrap_view = getattr(value, "unwrap_view", None)
    if callable(unwrap_view):
        try:
            return _ir_name(unwrap_view(), depth + 1)
        except (AttributeError, NotImplementedError):
            pass
    return None


def _as_expr(value: Any) -> Optional[sympy.Expr]:
    import torch

    if isinstance(value, sympy.Expr):
        return value
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value.node.expr
    return None


def _same_expr(lhs: sympy.Expr, rhs: sympy.Expr) -> bool:
    if lhs == rhs:
        return True
    try:
        return bool(sympy.simplify(lhs - rhs) == 0)
    except (TypeError, ValueError, AttributeError):
        return False


def _graph_input_index(value: Any, graph_input_names: Sequence[str], graph_inputs: Dict[str, Any]) -> Optional[int]:
    names = list(graph_input_names)
    name = _ir_name(value)
    if name is not None and name in names:
        return names.index(name)
    expr = _as_expr(value)
    for index, input_name in enumerate(names):
        input_value = graph_inputs.get(input_name)
        if input_value is None:
            continue
        if value is input_value:
            return index
        input_expr = _as_expr(input_value)
        if expr is not None and input_expr is not None and _same_expr(expr, input_expr):
            return index
    return None


def _source_of(value: Any, graph_input_names: Sequence[str], graph_inputs: Dict[str, Any],
               where: str) -> Dict[str, Any]:
    import torch

    index = _graph_input_index(value, graph_input_names, graph_inputs)
    if index is not None:
        return {"kind": "input", "index": index}
    if isinstance(value, (list, tuple)):
        return {"kind": "list", "items": [_source_of(item, graph_input_names, graph_inputs, where) for item in value]}
    if isinstance(value, torch.Tensor):
        raise _plan_error(
            f"Unsupported ACLGraph update Tensor constant for {where}: Tensor update values must be graph inputs. "
            "A tensor made inside the compiled code is baked into the graph; pass it to the compiled function as an "
            "input, or pass the lengths as a list of ints.")
    if value is None:
        return {"kind": "none"}
    if isinstance(value, sympy.Integer):
        return {"kind": "constant", "value": int(value)}
    if isinstance(value, _LITERALS):
        return {"kind": "constant", "value": value}
    expr = _as_expr(value)
    if expr is not None:
        raise _plan_error(
            f"Unsupported ACLGraph update source for {where}: the expression {expr} is computed from the graph's "
            "inputs, not one of them, so a replay cannot update it. Pass the value itself to the compiled function "
            "as an input.")
    raise _plan_error(f"Unsupported ACLGraph update source for {where}: {value!r} (of type {type(value).__name__}) "
                      "is neither a graph input nor an int, float, bool, str, None or a list of them.")


def build_aclgraph_update_plan_entry_for_inductor(
    op_overload: Any,
    args: Sequence[Any],
    kwargs: Dict[str, Any],
    graph_input_names: Sequence[str],
    graph_inputs: Dict[str, Any],
) -> Optional[Dict[str, Any]]:
    """The plan entry of one extern kernel call (``op_overload(*args,
    **kwargs)`` with Inductor's IR values), or None when nothing of the call
    is updated: no handler for the operator, the handler declines the call
    (its ``should_handle``), the call's layout takes no updates, or none of
    the handler's update keys is passed."""
    op_name = getattr(op_overload, "__name__", str(op_overload))
    handler = _handler_for_op(op_name)
    if handler is None:
        return None
    should_handle = getattr(handler, "should_handle", None)
    if should_handle is not None and not should_handle(op_overload, args, kwargs):
        return None
    bound = _bind_by_schema(op_overload, args, kwargs)
    if _is_excluded(op_name, bound):
        return None
    update_keys = {key for _where, _slot, key in _get_update_specs(handler, op_name)}
    updates = {key: _source_of(value, graph_input_names, graph_inputs, f"{op_name} argument {key}")
               for key, value in bound.items() if key in update_keys}
    if not updates:
        return None
    return {"op": op_name, "updates": updates}


def _call_arguments(node: Any):
    """(args, kwargs) of an extern kernel node as its operator takes them."""
    if hasattr(node, "unflatten_args"):
        return node.unflatten_args(node.inputs, node.constant_args)
    return [*node.inputs, *node.constant_args], dict(getattr(node, "kwargs", {}) or {})


def append_inductor_aclgraph_update_plan_for_codegen_node(wrapper: Any, node: Any) -> None:
    """Adds ``node``'s entry (if any) to the plan ``wrapper`` collects; called
    as the wrapper generates each extern kernel."""
    op_overload = getattr(node, "op_overload", None)
    if op_overload is None or not should_generate_inductor_aclgraph_update_plan():
        return
    args, kwargs = _call_arguments(node)
    entry = build_aclgraph_update_plan_entry_for_inductor(
        op_overload, args, kwargs, wrapper.get_graph_input_names(), wrapper.get_graph_inputs())
    if entry is None:
        return
    plan: List[Dict[str, Any]] = getattr(wrapper, "torch_npu_aclgraph_update_plan", None)
    if plan is None:
        plan = wrapper.torch_npu_aclgraph_update_plan = []
    plan.append(entry)


def emit_inductor_aclgraph_update_plan_for_wrapper(wrapper: Any, result: Any,
                                                   is_graph_partition_subgraph: bool) -> None:
    """Writes the collected plan as an attribute of the wrapper's launcher
    (``call``), where the replay reads it. A graph split into partitions
    leaves its plans to the partitions' launchers, which are replayed one by
    one. With torch's graph_partition on and no partition made, ``call`` is
    the bound method of the module's Runner: the attribute goes on its
    function, which the method's attribute lookup reaches."""
    from torch._inductor import config

    plan = getattr(wrapper, "torch_npu_aclgraph_update_plan", None)
    if not plan or not should_generate_inductor_aclgraph_update_plan():
        return
    if config.graph_partition and not is_graph_partition_subgraph and getattr(wrapper, "all_partition_names", None):
        return
    launcher = wrapper.launcher_fn_name
    result.writeline(f"setattr(getattr({launcher}, '__func__', {launcher}), {ACLGRAPH_UPDATE_PLAN_GLOBAL!r}, {plan!r})")
