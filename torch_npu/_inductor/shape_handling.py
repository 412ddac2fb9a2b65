"""Shape handling for torch.compile: few compiled shapes for many input shapes.

    torch.compile(fn, options={"enable_shape_handling": True,
                               "shape_handling_configs": [{"type": "BATCHSIZE", "max_size": 64}, ...]})

Each call's inputs are padded up to the nearest "gear" of their batch (and
sequence) dimension, and a batch above the largest gear is split into chunks
that each run through the compiled function; the outputs are concatenated
and the padding sliced off (torch_npu/_inductor/_shape_gears.py). So a
function called with batch sizes 3, 4, 5 and 6 compiles twice (gears 4 and
8), not four times. Real torch_npu's option and names; docs/graph_mode.md.

A config (one per dimension type, two at most):
    type        "BATCHSIZE" or "SEQLEN" (required)
    dimensions  the dimension's index: one for BATCHSIZE (default 0); for
                SEQLEN one for all tensors or one per listed tensor (default 1)
    indices     which flattened input tensors it applies to (default: every
                tensor that has the dimension, decided at the first call)
    value       the padding value (default 0.0)
    gears       explicit sizes; else min_size..max_size (default 1..1024) by
                policy "TIMES" (the powers of two between them)

Padding changes what a function computes unless its rows are independent
(a reduction over the batch sees the padding): it is for functions whose
batch elements do not interact, as on the chip.
"""

import copy
import logging
import warnings
from typing import Any, Callable, Dict, List, Optional

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from torch_npu._inductor._shape_gears import _NPUShapeHandling, ShapePolicy, ShapeType

__all__ = ["NPUShapeHandling"]

_log = logging.getLogger(__name__)

_TYPES = {"BATCHSIZE": ShapeType.BATCHSIZE, "SEQLEN": ShapeType.SEQLEN}
_POLICIES = {"TIMES": ShapePolicy.TIMES, "CUSTOM": ShapePolicy.CUSTOM}
_DEFAULT_DIMENSION = {"BATCHSIZE": 0, "SEQLEN": 1}


def _is_int_list(value):
    return isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value)


# field -> (what a valid value is, the test); "type" is checked first, separately.
_FIELD_RULES = {
    "dimensions": ("an int or a list of ints", lambda v: isinstance(v, int) or _is_int_list(v)),
    "indices": ("a list of ints", _is_int_list),
    "gears": ("a list of ints", _is_int_list),
    "min_size": ("an int", lambda v: isinstance(v, int)),
    "max_size": ("an int", lambda v: isinstance(v, int)),
    "value": ("a number", lambda v: isinstance(v, (int, float))),
    "policy": (f"one of {sorted(_POLICIES)}", lambda v: isinstance(v, str) and v in _POLICIES),
}


def _config_problem(config):
    """What is wrong with one config, or None."""
    kind = config.get("type")
    if not isinstance(kind, str) or kind not in _TYPES:
        return f"'type' must be one of {sorted(_TYPES)}, got {kind!r}"
    for field, (wanted, valid) in _FIELD_RULES.items():
        if field in config and not valid(config[field]):
            return f"'{field}' must be {wanted}, got {config[field]!r}"
    return None


def _placement(config):
    """(dimensions, indices) of a config, one dimension per listed tensor for
    SEQLEN; None while its tensors are not known yet."""
    indices = list(config.get("indices") or ())
    if not indices:
        return None
    dimensions = list(config.get("dimensions") or (_DEFAULT_DIMENSION[config["type"]],))
    if config["type"] == "SEQLEN" and len(dimensions) == 1:
        dimensions *= len(indices)
    return dimensions, indices


class NPUShapeHandling(_NPUShapeHandling):
    """Gears for the dimensions `configs` describe (module docstring).

    Without configs, the batch dimension (0) of every input tensor, gears
    1..1024. The four optional hooks replace how a call's arguments become
    tensors and back: transform_pre_fn(*args, **kwargs) -> tensors,
    transform_post_fn(groups) -> (args per call, kwargs per call),
    recover_pre_fn(outputs per call) -> tensor groups, recover_post_fn(tensors)
    -> the result.
    """

    def __init__(self, configs: Optional[List[Dict[str, Any]]] = None,
                 transform_pre_fn: Optional[Callable] = None, transform_post_fn: Optional[Callable] = None,
                 recover_pre_fn: Optional[Callable] = None, recover_post_fn: Optional[Callable] = None) -> None:
        super().__init__()
        self.transform_pre_fn, self.transform_post_fn = transform_pre_fn, transform_post_fn
        self.recover_pre_fn, self.recover_post_fn = recover_pre_fn, recover_post_fn
        self.delay_init = False
        if configs:
            self._validate_configs(configs)
            self.configs = configs
            self._initialize_from_configs(configs)
        else:
            self.delay_init = True
            self.configs = [{"type": "BATCHSIZE", "dimensions": [0], "indices": [], "value": 0.0, "gears": [],
                             "min_size": 1, "max_size": 1024, "policy": "TIMES"}]

    # --- configs -------------------------------------------------------------

    def _validate_configs(self, configs: List[Dict[str, Any]]) -> None:
        """Raises ValueError naming the config and the field for anything
        malformed; normalises `dimensions` to a list (one entry for BATCHSIZE)."""
        if not configs:
            return
        if len(configs) > len(_TYPES):
            raise ValueError(f"NPUShapeHandling takes one config per dimension type, {len(_TYPES)} at most; "
                             f"got {len(configs)}.")
        for i, config in enumerate(configs):
            problem = _config_problem(config)
            if problem:
                raise ValueError(f"shape_handling_configs[{i}]: {problem}")
            dimensions = config.get("dimensions")
            if isinstance(dimensions, int):
                config["dimensions"] = [dimensions]
            elif config["type"] == "BATCHSIZE" and dimensions is not None and len(dimensions) > 1:
                warnings.warn(f"shape_handling_configs[{i}]: BATCHSIZE uses one dimension; taking {dimensions[0]}")
                config["dimensions"] = [dimensions[0]]
        kinds = [config["type"] for config in configs]
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"shape_handling_configs: each type may appear once, got {kinds}.")

    def _initialize_from_configs(self, configs: List[Dict[str, Any]]) -> None:
        """Hands each config whose tensors are known to the core; a config
        without `indices` waits for the first call (delay_init)."""
        for config in configs:
            placement = _placement(config)
            if placement is None:
                self.delay_init = True
                continue
            kind, value = _TYPES[config["type"]], config.get("value", 0.0)
            if config.get("gears"):
                sizes = (list(config["gears"]),)
            else:
                sizes = (config.get("min_size", 1), config.get("max_size", 1024), _POLICIES[config.get("policy", "TIMES")])
            self.initialize(kind, *sizes, *placement, value)

    def _construct_indices(self, tensors: List[torch.Tensor], dimensions, dimension_type) -> List[int]:
        """The positions of the tensors that have the config's dimension."""
        dimensions = list(dimensions) or [_DEFAULT_DIMENSION[dimension_type]]
        if dimension_type == "BATCHSIZE" or len(dimensions) == 1:
            dimensions = [dimensions[0]] * len(tensors)
        return [i for i, (dim, tensor) in enumerate(zip(dimensions, tensors)) if tensor.ndim > dim]

    def delay_initialize(self, tensors: List[torch.Tensor]) -> None:
        """Completes the configs without indices from the first call's tensors."""
        pending = []
        for config in self.configs:
            if not config.get("indices"):
                config["indices"] = self._construct_indices(tensors, config.get("dimensions", []), config["type"])
                pending.append(config)
        if pending:
            self._initialize_from_configs(pending)
        self.delay_init = False

    # --- tensors ---------------------------------------------------------------

    def transform(self, tensors: List[torch.Tensor]) -> List[List[torch.Tensor]]:
        if self.delay_init:
            self.delay_initialize(list(tensors))
        return super().transform(tensors)

    def get_shape_safe(self, item):
        """Shapes of a (nested) structure of tensors, for logs: the type of anything else."""
        if isinstance(item, torch.Tensor):
            return list(item.shape)
        if isinstance(item, (list, tuple)):
            return [self.get_shape_safe(i) for i in item]
        return type(item)

    # --- a call's arguments and results ----------------------------------------

    def flatten_to_tensors(self, structure: Any):
        """(tensors, their positions among the leaves, the leaves, the tree spec)."""
        leaves, spec = tree_flatten(structure)
        indices = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        return [leaves[i] for i in indices], indices, leaves, spec

    def unflatten_from_tensors(self, tensors, indices, leaves, spec) -> Any:
        leaves = list(leaves)
        for index, tensor in zip(indices, tensors):
            leaves[index] = tensor
        return tree_unflatten(leaves, spec)

    def transform_hook(self, *args: Any, **kwargs: Any):
        """A call's arguments -> (args of each call to make, kwargs of each)."""
        if self.transform_pre_fn:
            tensors = self.transform_pre_fn(*args, **kwargs)
        else:
            tensors, indices, leaves, spec = self.flatten_to_tensors((args, kwargs))
        if _log.isEnabledFor(logging.INFO):
            _log.info("[Transform] %d input tensors, shapes %s", len(tensors), self.get_shape_safe(list(tensors)))
        groups = self.transform(tensors=list(tensors))
        if _log.isEnabledFor(logging.INFO):
            _log.info("[Transform] into %s", [self.get_shape_safe(g) for g in groups])
        if self.transform_post_fn:
            result = self.transform_post_fn(groups)
        else:
            result = zip(*[self.unflatten_from_tensors(group, indices, leaves, spec) for group in groups])
        if not result:
            _log.error("shape handling: transform_post_fn returned %r instead of (args, kwargs) per call", result)
        return result

    def recover_hook(self, groups: List[Any]) -> Any:
        """The results of each call -> the result of one call on the original arguments."""
        if self.recover_pre_fn:
            tensor_groups = self.recover_pre_fn(groups)
        else:
            tensor_groups, indices, leaves, spec = [], [], [], None
            for result in groups:
                tensors, indices, leaves, spec = self.flatten_to_tensors(result)
                tensor_groups.append(tensors)
        recovered = self.recover(tensor_groups=tensor_groups)
        if self.recover_post_fn:
            return self.recover_post_fn(recovered)
        return self.unflatten_from_tensors(recovered, indices, leaves, spec)


def unified_copy(data: Any) -> Any:
    """An independent copy: tensors cloned (detached), containers rebuilt,
    other objects deep-copied where they can be (else returned as they are)."""
    if data is None:
        return None
    if isinstance(data, torch.Tensor):
        return data.clone().detach()
    if isinstance(data, dict):
        return {key: unified_copy(value) for key, value in data.items()}
    if isinstance(data, list):
        return [unified_copy(item) for item in data]
    if isinstance(data, tuple):
        return tuple(unified_copy(item) for item in data)
    try:
        return copy.deepcopy(data)
    except (TypeError, ValueError):
        return data


def _handling_for(compiler_config):
    """The NPUShapeHandling a torch.compile with these Inductor options uses
    (options that enable it: torch_npu/utils/_shape_handling_hook.py decides)."""
    hooks = compiler_config.get("shape_handling_dict") or {}
    return NPUShapeHandling(configs=compiler_config.get("shape_handling_configs"),
                            transform_pre_fn=hooks.get("trans_pre_fn"), transform_post_fn=hooks.get("trans_post_fn"),
                            recover_pre_fn=hooks.get("re_pre_fn"), recover_post_fn=hooks.get("re_post_fn"))


def call_through_gears(handling, compiled, args, kwargs):
    """One call of a function compiled with shape handling: its arguments
    transformed into one group per call, ``compiled`` called on each, the
    results recovered (torch_npu/utils/_shape_handling_hook.py)."""
    args_per_call, kwargs_per_call = handling.transform_hook(*args, **kwargs)
    calls = list(zip(args_per_call, kwargs_per_call))
    # With several calls, an earlier call's outputs may live in memory the
    # next replay reuses (NPU graphs): each is copied before that call.
    keep = unified_copy if len(calls) > 1 else (lambda result: result)
    return handling.recover_hook([keep(compiled(*a, **k)) for a, k in calls])


def patch_dynamo_context():
    """Makes a function compiled with shape handling run through its gears
    (torch_npu/utils/_shape_handling_hook.py, which torch.compile installs
    without loading npu's Inductor backend)."""
    from torch_npu.utils import _shape_handling_hook

    _shape_handling_hook.patch_dynamo_context()


def patch_shape_handling():
    """Installs shape handling (once); torch.compile's Inductor wrapper calls
    it when its options enable shape handling."""
    if getattr(patch_shape_handling, "_is_patched", False):
        return
    patch_dynamo_context()
    patch_shape_handling._is_patched = True
