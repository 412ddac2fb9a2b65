"""Per-operator hooks for NPU graph capture with updatable arguments.

When an NPU graph captures with ``auto_dispatch_capture=True`` (graphs.py's
``_GraphDispatchMode``), each call to an operator that has a handler here is
captured on its own and recorded, so that ``NPUGraph.update`` can later
re-issue it with some arguments replaced (sequence lengths, context
lengths) without capturing again. The handler says how:

- ``prepare_capture``: what is actually captured (e.g. the .out overload
  into buffers allocated first, so an update rewrites the same memory);
- ``postprocess_result``: what the caller gets back;
- ``record_wrap_kwarg``: how a keyword argument is kept in the record;
- ``UPDATE_SPECS`` / ``get_update_specs`` / ``update_args``: which
  recorded arguments an update replaces, from which update key.

Handlers are looked up by operator name in ``_NPU_GRAPH_OP_HANDLERS``
(filled by ``register_npu_graph_handler``); real torch_npu's tests read
and restore that dict directly, so it stays a plain module-level dict.
A handler may also define ``should_handle(func, args, kwargs)`` to decline
some calls; the base class leaves it out so that callers can tell.
"""

import copy
import logging
from typing import Any, Callable, Dict, List, Sequence, Tuple, Type, Union

import torch

__all__ = ["NpuGraphOpHandler", "register_npu_graph_handler"]

logger = logging.getLogger(__name__)

# "op" (an overload packet), "op.default" or "op.out" -> the handler class.
_NPU_GRAPH_OP_HANDLERS: Dict[str, Type["NpuGraphOpHandler"]] = {}

# (kind, target, update key): kind "arg" with a position, or "kwarg" with a name.
UpdateSpec = Tuple[str, Union[int, str], str]


def register_npu_graph_handler(op_names: Union[str, Sequence[str]]) -> Callable[[type], type]:
    """Class decorator registering the class as the handler of ``op_names``
    (one name or a list/tuple of them). Re-registering a name replaces its
    handler and logs a warning, so a user's handler can take over a built-in one."""
    names = [op_names] if not isinstance(op_names, (list, tuple)) else list(op_names)

    def register(handler_cls: type) -> type:
        for name in names:
            _check_op_name(name)
            replaced = _NPU_GRAPH_OP_HANDLERS.get(name)
            if replaced not in (None, handler_cls):
                logger.warning("NpuGraphOpHandler for '%s' is being overridden: %s -> %s",
                               name, replaced.__name__, handler_cls.__name__)
            _NPU_GRAPH_OP_HANDLERS[name] = handler_cls
        return handler_cls

    return register


def _check_op_name(name: Any) -> None:
    if isinstance(name, str) and name:
        return
    raise TypeError(f"register_npu_graph_handler: operator names are non-empty strings, got {name!r}")


def _kept_for_record(value: Any) -> Any:
    """How the record holds a value: an npu tensor as a non-owning view
    (the graph's memory pool keeps its storage for the graph's lifetime, and
    an update must write where the captured kernels read), anything else as
    a private copy the caller cannot change afterwards."""
    if isinstance(value, torch.Tensor) and value.device.type == "npu":
        from torch_npu._C import _weak_ref_tensor
        return _weak_ref_tensor(value)
    return copy.deepcopy(value)


class NpuGraphOpHandler:
    """Base handler: captures the call as made and returns its result.

    Handlers carry no state: every hook is a classmethod and the registry
    stores classes. ``UPDATE_SPECS`` maps an operator name to the recorded
    positional arguments an update may replace, as ``(kind, position, key)``
    triples; ``("arg", 6, "actual_seq_lengths_kv")`` replaces argument 6
    with ``update_input["actual_seq_lengths_kv"]``. (Recorded keyword
    arguments are replaced by the update key of the same name by the caller.)
    """

    UPDATE_SPECS: Dict[str, List[UpdateSpec]] = {}

    @classmethod
    def prepare_capture(cls, func: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> Tuple[Any, Any, Any]:
        """Returns the (func, args, kwargs) to capture in place of the call."""
        return func, args, kwargs

    @classmethod
    def postprocess_result(cls, result: Any, kwargs: Dict[str, Any]) -> Any:
        """Returns what the caller of the captured operator receives."""
        return result

    @classmethod
    def get_update_specs(cls, op_name: str) -> List[UpdateSpec]:
        return cls.UPDATE_SPECS.get(op_name, [])

    @classmethod
    def update_args(cls, dispatch_record: Any, update_input: Dict[str, Any]) -> None:
        """Writes the values of ``update_input`` (update key -> value) into the
        recorded arguments this operator's specs name; keys absent from
        ``update_input`` leave their argument as recorded."""
        specs = cls.get_update_specs(dispatch_record.op_cache_entry.__name__)
        for kind, target, key in specs:
            if key not in update_input:
                continue
            value = update_input[key]
            if kind == "kwarg":
                dispatch_record.kwargs[target] = value
            elif kind == "arg" and target < len(dispatch_record.args):
                # A call that passed fewer positionals left this one defaulted.
                dispatch_record.args[target] = value

    @classmethod
    def record_wrap_kwarg(cls, key: str, value: Any, tensor_param_names: Sequence[str]) -> Any:
        """Returns keyword argument ``key`` as the record keeps it. Npu tensors
        in a list, or passed for one of the schema's ``tensor_param_names``,
        are kept as non-owning views; everything else is copied."""
        if value is None:
            return None
        if isinstance(value, (list, tuple)):
            return type(value)(_kept_for_record(item) for item in value)
        if key in tensor_param_names:
            return _kept_for_record(value)
        return copy.deepcopy(value)
