"""The replay's side of ACLGraph update plans (the format: the package's
docstring): a plan is checked against the operators a graph captured, then
resolved, for each replay, into the input of ``NPUGraph.update``.

Every refusal is a RuntimeError in real torch_npu's words that names the
plan entry, and the key, at fault."""

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

# The attribute of a compiled graph's launcher that holds its plan.
ACLGRAPH_UPDATE_PLAN_GLOBAL = "_torch_npu_aclgraph_update_plan"

_SOURCE_KINDS = ("input", "constant", "none", "list")


def _refused(message: str) -> RuntimeError:
    return RuntimeError(message + pta_error(ErrCode.PARAM))


# ---------------------------------------------------------------------------
# Operators and their handlers
# ---------------------------------------------------------------------------

def _base_op_name(op_name: str) -> str:
    """The operator an overload belongs to: ``op.default`` and ``op.out`` are
    both ``op``, since a call through the overload packet is captured under
    the packet's name."""
    head, dot, overload = op_name.rpartition(".")
    return head if dot and overload in ("default", "out") else op_name


def _handler_update_keys(handler_cls: Any, op_name: str) -> set:
    """The argument names that ``handler_cls``'s update specs
    ``(where, slot, key)`` let a replay update in a call of ``op_name``."""
    if hasattr(handler_cls, "get_update_specs"):
        specs = handler_cls.get_update_specs(op_name)
    else:  # handlers older than get_update_specs declare a table
        specs = getattr(handler_cls, "UPDATE_SPECS", {}).get(op_name, [])
    return {key for _where, _slot, key in specs}


def _recorded_op(record: Any) -> str:
    return record.op_cache_entry.__name__


def _keys_record_takes(record: Any) -> set:
    """What an update of a captured call may name: the keyword arguments it
    was recorded with, and the keys its handler maps onto positional ones."""
    from torch_npu.npu._npugraph_handlers.npugraph_handler import _NPU_GRAPH_OP_HANDLERS

    op_name = _recorded_op(record)
    keys = set(getattr(record, "kwargs", None) or {})
    handler = _NPU_GRAPH_OP_HANDLERS.get(op_name)
    if handler is not None:
        keys |= _handler_update_keys(handler, op_name)
    return keys


# ---------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------

def _where(entry_idx: int, key: str) -> str:
    return f"ACLGraph update plan entry {entry_idx} key {key}"


def _kind_of(where: str, source: Any) -> str:
    if not isinstance(source, dict):
        raise _refused(f"{where} has invalid source {source!r}")
    kind = source.get("kind")
    if kind not in _SOURCE_KINDS:
        raise _refused(f"{where} has unsupported source kind {kind!r}")
    return kind


def _items_of(where: str, source: Dict[str, Any]) -> list:
    items = source.get("items")
    if isinstance(items, list):
        return items
    raise _refused(f"{where} has invalid list source items {items!r}")


def _is_input_index(index: Any) -> bool:
    return type(index) is not bool and isinstance(index, int) and index >= 0


def _is_plain_constant(value: Any) -> bool:
    """A value a plan may carry: None, a bool/int/float/str, or a list or
    tuple of such. Not a tensor: it would tie every replay to the memory of
    the one capture it came from; tensors come in as graph inputs."""
    if isinstance(value, (list, tuple)):
        return all(_is_plain_constant(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, str))


def _check_source(where: str, source: Any) -> None:
    kind = _kind_of(where, source)
    if kind == "input":
        if not _is_input_index(source.get("index")):
            raise _refused(f"{where} has invalid input index {source.get('index')}")
    elif kind == "constant":
        if not _is_plain_constant(source.get("value")):
            raise _refused(f"{where} has unsupported constant value {source.get('value')!r}")
    elif kind == "list":
        for item in _items_of(where, source):
            _check_source(where, item)


def _value_of(where: str, source: Any, new_inputs: Sequence[Any]) -> Any:
    kind = _kind_of(where, source)
    if kind == "list":
        return [_value_of(where, item, new_inputs) for item in _items_of(where, source)]
    if kind == "constant":
        return source.get("value")
    if kind == "none":
        return None
    index = source.get("index")
    if not _is_input_index(index) or index >= len(new_inputs):
        raise _refused(f"{where} input index {index} is out of range for {len(new_inputs)} inputs")
    return new_inputs[index]


# ---------------------------------------------------------------------------
# Plans
# ---------------------------------------------------------------------------

def resolve_aclgraph_update_plan(plan: Sequence[Dict[str, Any]], new_inputs: Sequence[Any]) -> List[Dict[str, Any]]:
    """The input of ``NPUGraph.update`` for a replay with ``new_inputs``: for
    each plan entry, its update keys with the values their sources give."""
    resolved = []
    for entry_idx, entry in enumerate(plan or ()):
        updates = entry.get("updates", {})
        resolved.append({key: _value_of(_where(entry_idx, key), source, new_inputs)
                         for key, source in updates.items()})
    return resolved


def _check_entry(idx: int, entry: Any, record: Any) -> None:
    """One plan entry against the call it stands for."""
    if not isinstance(entry, dict):
        raise _refused(f"ACLGraph update plan has invalid plan entry at index {idx}: {entry!r}")
    planned, recorded = entry.get("op"), _recorded_op(record)
    if not isinstance(planned, str):
        raise _refused(f"ACLGraph update plan has invalid plan entry: entry {idx} op must be a string, "
                       f"got {planned!r}")
    if planned != recorded and _base_op_name(planned) != _base_op_name(recorded):
        raise _refused(f"ACLGraph update plan op mismatch: entry {idx} expects {planned!r}, "
                       f"captured {recorded!r}")
    updates = entry.get("updates", {})
    if not isinstance(updates, dict):
        raise _refused(f"ACLGraph update plan has invalid plan entry: entry {idx} updates must be a dict, "
                       f"got {updates!r}")
    if not updates:
        raise _refused(f"ACLGraph update plan entry has no updates: entry {idx}, op {recorded!r}")
    foreign = sorted(set(updates) - _keys_record_takes(record))
    if foreign:
        raise _refused(f"ACLGraph update plan has key(s) that captured op cannot consume: entry {idx}, "
                       f"op {recorded!r}, keys {foreign}")
    for key, source in updates.items():
        _check_source(_where(idx, key), source)


def validate_aclgraph_update_plan(plan: Sequence[Dict[str, Any]], graph_dispatch_records: Sequence[Any]) -> None:
    """Checks ``plan`` against the calls a graph captured (its
    ``graph_dispatch_mode.graph_dispatch_records``): an entry per call, in
    capture order, each naming its call's operator and only keys that call
    takes."""
    plan = plan or []
    records = list(graph_dispatch_records)
    if records and not plan:
        raise _refused(
            f"Captured updatable ACLGraph operators but missing ACLGraph update plan: "
            f"{[_recorded_op(record) for record in records]}. This may be "
            "caused by reusing cached compiled code generated with ACLGraph disabled or by using the npugraphs "
            "backend, which does not support ACLGraph update plans yet.")
    if len(plan) != len(records):
        raise _refused(f"ACLGraph update plan length mismatch: plan has {len(plan)} entries but graph captured "
                       f"{len(records)} updatable records")
    for idx, entry in enumerate(plan):
        _check_entry(idx, entry, records[idx])


def build_cpu_update_input_for_graph(plan: Sequence[Dict[str, Any]], new_inputs: Sequence[Any],
                                     graph_dispatch_records: Sequence[Any]) -> List[Dict[str, Any]]:
    """``plan`` checked against the captured calls, then resolved."""
    validate_aclgraph_update_plan(plan, graph_dispatch_records)
    return resolve_aclgraph_update_plan(plan, new_inputs)


# ---------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------

def _has_dispatch_records(graph: Any) -> bool:
    """Only a graph captured with auto_dispatch_capture records its calls."""
    return bool(getattr(graph, "auto_dispatch_capture", False)) if graph is not None else False


def validate_aclgraph_update_plan_for_graph(plan: Sequence[Dict[str, Any]], graph: Any) -> None:
    """``validate_aclgraph_update_plan`` against the calls an NPUGraph
    captured; a graph captured without auto_dispatch_capture has none to
    check."""
    if _has_dispatch_records(graph):
        validate_aclgraph_update_plan(plan, graph.graph_dispatch_mode.graph_dispatch_records)


def update_aclgraph_records_for_graph(cpu_update_input: Sequence[Dict[str, Any]], graph: Any) -> bool:
    """Queues ``graph.update(cpu_update_input)``, which the next replay waits
    for. False, and nothing queued, when there is nothing to update."""
    if not cpu_update_input or not _has_dispatch_records(graph):
        return False
    graph.update(list(cpu_update_input))
    return True
