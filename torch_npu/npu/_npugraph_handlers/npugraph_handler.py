"""NpuGraphOpHandler (the hooks of one operator's capture and update) and
the registry that maps operator names to handlers."""

import copy
import logging

import torch

__all__ = ["NpuGraphOpHandler", "register_npu_graph_handler"]

log = logging.getLogger(__name__)

# Operator name (a packet "op", or an overload "op.default" / "op.out") -> handler class.
_NPU_GRAPH_OP_HANDLERS = {}


def _is_npu_tensor(value):
    return isinstance(value, torch.Tensor) and value.device.type == "npu"


def _weak(value):
    """A recorded npu tensor: a view of its memory that does not keep it alive
    (the graph's pool does, for as long as the graph lives)."""
    from torch_npu._C import _weak_ref_tensor
    return _weak_ref_tensor(value)


class NpuGraphOpHandler:
    """How one operator is captured and updated. Handlers are stateless: the
    hooks are classmethods and the registry holds the classes.

    ``UPDATE_SPECS`` names, per operator name, the positional arguments an
    update may replace and the update key each takes its value from:
    ``{"my_op.default": [("arg", 2, "batch")]}``. Keyword arguments recorded
    at capture are replaced by the update key of the same name.
    """

    UPDATE_SPECS = {}

    @classmethod
    def prepare_capture(cls, func, args, kwargs):
        """Before the call is captured: may allocate its workspace or outputs,
        or swap ``func`` for its .out overload. Returns (func, args, kwargs)."""
        return func, args, kwargs

    @classmethod
    def postprocess_result(cls, result, kwargs):
        """What the captured call returns to its caller."""
        return result

    @classmethod
    def get_update_specs(cls, op_name):
        return cls.UPDATE_SPECS.get(op_name, [])

    @classmethod
    def update_args(cls, dispatch_record, update_input):
        """Replaces the recorded positional arguments UPDATE_SPECS names with
        the values of ``update_input`` (a dict of update keys)."""
        for where, slot, key in cls.get_update_specs(dispatch_record.op_cache_entry.__name__):
            if key not in update_input:
                continue
            if where == "arg":
                if len(dispatch_record.args) > slot:
                    dispatch_record.args[slot] = update_input[key]
            elif where == "kwarg":
                dispatch_record.kwargs[slot] = update_input[key]

    @classmethod
    def record_wrap_kwarg(cls, key, value, tensor_param_names):
        """A keyword argument as the record keeps it: npu tensors (alone or in
        a list) as views that do not own their memory, anything else copied."""
        if value is None:
            return None
        if isinstance(value, (list, tuple)):
            return type(value)(_weak(v) if _is_npu_tensor(v) else copy.deepcopy(v) for v in value)
        if key in tensor_param_names and _is_npu_tensor(value):
            return _weak(value)
        return copy.deepcopy(value)


def register_npu_graph_handler(op_names):
    """Class decorator: ``cls`` handles the operators named (``"op"``,
    ``"op.default"``, ``"op.out"``; a name or a list). A later registration
    of the same name replaces the earlier one, with a warning in the log."""
    names = list(op_names) if isinstance(op_names, (list, tuple)) else [op_names]

    def decorator(cls):
        for name in names:
            if not isinstance(name, str) or not name:
                raise TypeError(f"register_npu_graph_handler: operator names are non-empty strings, got {name!r}")
            previous = _NPU_GRAPH_OP_HANDLERS.get(name)
            if previous is not None and previous is not cls:
                log.warning("NpuGraphOpHandler for '%s' is being overridden: %s -> %s", name,
                            previous.__name__, cls.__name__)
            _NPU_GRAPH_OP_HANDLERS[name] = cls
        return cls
    return decorator
