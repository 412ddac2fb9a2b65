"""Checking an ACLGraph update plan against what a graph captured, and turning
it into ``NPUGraph.update``'s input for a replay's new inputs (the plan's
format: the package's docstring). Errors are RuntimeErrors in real
torch_npu's words, each naming the entry and key at fault."""

from typing import Any, Dict, List, Sequence

from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = [
    "ACLGRAPH_UPDATE_PLAN_GLOBAL",
    "build_cpu_update_input_for_graph",
    "resolve_aclgraph_update_plan",
    "update_aclgraph_records_for_graph",
    "validate_aclgraph_update_plan",
    "validate_aclgraph_update_plan_for_graph",
]

# The module-level name under which compiled code keeps its plan.
ACLGRAPH_UPDATE_PLAN_GLOBAL = "_torch_npu_aclgraph_update_plan"

_OVERLOAD_SUFFIXES = (".default", ".out")
_LITERALS = (int, float, bool, str)


def _plan_error(message: str) -> RuntimeError:
    return RuntimeError(message + pta_error(ErrCode.PARAM))


def _normalize_op_name(op_name: str) -> str:
    """``op.default`` and ``op.out`` name the operator ``op`` (an overload
    packet's call is captured under the packet's name)."""
    for suffix in _OVERLOAD_SUFFIXES:
        if op_name.endswith(suffix):
            return op_name[: -len(suffix)]
    return op_name


def _get_update_specs(handler_cls: Any, op_name: str) -> List[Any]:
    # Handlers written before get_update_specs existed only have UPDATE_SPECS.
    if hasattr(handler_cls, "get_update_specs"):
        return handler_cls.get_update_specs(op_name)
    return getattr(handler_cls, "UPDATE_SPECS", {}).get(op_name, [])


def _captured_op_name(record: Any) -> str:
    return record.op_cache_entry.__name__


def _consumable_keys(record: Any) -> set:
    """The update keys a captured call takes: its recorded keyword arguments
    and the keys its handler's update specs map onto positional ones."""
    from torch_npu.npu._npugraph_handlers.npugraph_handler import _NPU_GRAPH_OP_HANDLERS

    op_name = _captured_op_name(record)
    keys = set(getattr(record, "kwargs", {}) or {})
    handler = _NPU_GRAPH_OP_HANDLERS.get(op_name)
    if handler is not None:
        keys.update(key for _where, _slot, key in _get_update_specs(handler, op_name))
    return keys


def _check_source(entry_idx: int, key: str, source: Any, new_inputs=None) -> Any:
    """Checks one source; with ``new_inputs``, also returns its value."""
    where = f"ACLGraph update plan entry {entry_idx} key {key}"
    if not isinstance(source, dict):
        raise _plan_error(f"{where} has invalid source {source!r}")
    kind = source.get("kind")
    if kind == "input":
        index = source.get("index")
        valid = isinstance(index, int) and not isinstance(index, bool) and index >= 0
        if new_inputs is None:
            if not valid:
                raise _plan_error(f"{where} has invalid input index {index}")
            return None
        if not valid or index >= len(new_inputs):
            raise _plan_error(f"{where} input index {index} is out of range for {len(new_inputs)} inputs")
        return new_inputs[index]
    if kind == "constant":
        value = source.get("value")
        if new_inputs is None and not _is_literal(value):
            raise _plan_error(f"{where} has unsupported constant value {value!r}")
        return value
    if kind == "none":
        return None
    if kind == "list":
        items = source.get("items")
        if not isinstance(items, list):
            raise _plan_error(f"{where} has invalid list source items {items!r}")
        return [_check_source(entry_idx, key, item, new_inputs) for item in items]
    raise _plan_error(f"{where} has unsupported source kind {kind!r}")


def _is_literal(value: Any) -> bool:
    # Tensors must come in as graph inputs: a constant tensor in a plan would
    # pin one capture's memory into every replay.
    if value is None or isinstance(value, _LITERALS):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_literal(item) for item in value)
    return False


def resolve_aclgraph_update_plan(plan: Sequence[Dict[str, Any]], new_inputs: Sequence[Any]) -> List[Dict[str, Any]]:
    """``NPUGraph.update``'s input for a replay with ``new_inputs``: per plan
    entry, each update key with its source's value."""
    return [
        {key: _check_source(entry_idx, key, source, new_inputs) for key, source in entry.get("updates", {}).items()}
        for entry_idx, entry in enumerate(plan or [])
    ]


def validate_aclgraph_update_plan(plan: Sequence[Dict[str, Any]], graph_dispatch_records: Sequence[Any]) -> None:
    """Checks ``plan`` against the calls a graph captured (its
    ``graph_dispatch_mode.graph_dispatch_records``): one entry per call, in
    order, naming the call's operator and only keys the call can take."""
    plan = plan or []
    records = list(graph_dispatch_records)
    if not plan and records:
        captured = [_captured_op_name(record) for record in records]
        raise _plan_error(
            f"Captured updatable ACLGraph operators but missing ACLGraph update plan: {captured}. This may be "
            "caused by reusing cached compiled code generated with ACLGraph disabled or by using the npugraphs "
            "backend, which does not support ACLGraph update plans yet.")
    if len(plan) != len(records):
        raise _plan_error(f"ACLGraph update plan length mismatch: plan has {len(plan)} entries but graph captured "
                          f"{len(records)} updatable records")
    for idx, (entry, record) in enumerate(zip(plan, records)):
        if not isinstance(entry, dict):
            raise _plan_error(f"ACLGraph update plan has invalid plan entry at index {idx}: {entry!r}")
        expected, captured = entry.get("op"), _captured_op_name(record)
        if not isinstance(expected, str):
            raise _plan_error(f"ACLGraph update plan has invalid plan entry: entry {idx} op must be a string, "
                              f"got {expected!r}")
        if expected != captured and _normalize_op_name(expected) != _normalize_op_name(captured):
            raise _plan_error(f"ACLGraph update plan op mismatch: entry {idx} expects {expected!r}, "
                              f"captured {captured!r}")
        updates = entry.get("updates", {})
        if not isinstance(updates, dict):
            raise _plan_error(f"ACLGraph update plan has invalid plan entry: entry {idx} updates must be a dict, "
                              f"got {updates!r}")
        if not updates:
            raise _plan_error(f"ACLGraph update plan entry has no updates: entry {idx}, op {captured!r}")
        unknown = sorted(set(updates) - _consumable_keys(record))
        if unknown:
            raise _plan_error(f"ACLGraph update plan has key(s) that captured op cannot consume: entry {idx}, "
                              f"op {captured!r}, keys {unknown}")
        for key, source in updates.items():
            _check_source(idx, key, source)


def build_cpu_update_input_for_graph(plan: Sequence[Dict[str, Any]], new_inputs: Sequence[Any],
                                     graph_dispatch_records: Sequence[Any]) -> List[Dict[str, Any]]:
    """Validates ``plan`` against the captured calls, then resolves it."""
    validate_aclgraph_update_plan(plan, graph_dispatch_records)
    return resolve_aclgraph_update_plan(plan, new_inputs)


def _captures_automatically(graph: Any) -> bool:
    return graph is not None and bool(getattr(graph, "auto_dispatch_capture", False))


def validate_aclgraph_update_plan_for_graph(plan: Sequence[Dict[str, Any]], graph: Any) -> None:
    """validate_aclgraph_update_plan against an NPUGraph's captured calls;
    nothing to check for a graph captured without auto_dispatch_capture."""
    if _captures_automatically(graph):
        validate_aclgraph_update_plan(plan, graph.graph_dispatch_mode.graph_dispatch_records)


def update_aclgraph_records_for_graph(cpu_update_input: Sequence[Dict[str, Any]], graph: Any) -> bool:
    """Queues ``graph.update(cpu_update_input)`` (the next replay waits for
    it); returns whether there was anything to update."""
    if not _captures_automatically(graph) or not cpu_update_input:
        return False
    graph.update(list(cpu_update_input))
    return True
