"""Which function's calls the profiler counts FLOPs for, and with which formula.

An operator name is registered with a formula (it takes the operator's own
arguments and returns its floating-point operation count) and, optionally, a
target ("module:attribute", e.g. "torch_npu:npu_fusion_attention"): the
function _flops_hook wraps while a profile with ``with_flops`` and mstx runs.

Two registries, looked up in this order:
- ``_npu_flop_registry``: what users (or extensions) register with
  ``register_npu_flop``; a later registration of a name replaces the earlier
  one, with an error logged;
- ``_default_npu_flop_registry``: vNPU's built-in formulas
  (_flops_formulas.py, ``is_default=True``).
A user's formula without a target keeps the target of the default it
replaces. Real torch_npu's tests read and clean both dicts by name.
"""

import logging
from typing import Callable, NamedTuple, Optional

logger = logging.getLogger(__name__)


class _Registration(NamedTuple):
    formula: Callable
    target: Optional[str]  # "module:attribute" to wrap, or None


_npu_flop_registry = {}          # op name -> _Registration, from users
_default_npu_flop_registry = {}  # op name -> _Registration, vNPU's own


_LOOKUP_ORDER = (_npu_flop_registry, _default_npu_flop_registry)  # a user's entry first


def _op_name(formula, target, op_name):
    # Explicit name, else the target's attribute, else the formula's own name.
    if op_name is not None:
        return op_name
    if target is not None and ":" in target:
        return target.partition(":")[2]
    return formula.__name__


def register_npu_flop(target=None, op_name=None, *, is_default=False):
    """Decorator registering a FLOPs formula for ``op_name`` (default: the
    target's attribute, else the formula's name)."""
    def add(formula):
        name = _op_name(formula, target, op_name)
        if is_default:
            _default_npu_flop_registry[name] = _Registration(formula, target)
        else:
            _add_users(name, _Registration(formula, target))
        return formula
    return add


def _add_users(name, registration):
    # Two extensions may claim one operator; the last import wins, loudly.
    if name in _npu_flop_registry:
        logger.error("Duplicate external FLOPs registration for %s. The later registration takes precedence.", name)
    _npu_flop_registry[name] = registration


def get_flop_func(op_name):
    """The formula counting ``op_name``'s FLOPs (a user's first), or None."""
    for registry in _LOOKUP_ORDER:
        if op_name in registry:
            return registry[op_name].formula
    return None


def _target_of(op_name):
    for registry in _LOOKUP_ORDER:
        registration = registry.get(op_name)
        if registration is not None and registration.target is not None:
            return registration.target
    return None


def get_npu_flop_targets():
    """op name -> "module:attribute" of every operator with a target."""
    names = dict.fromkeys([*_default_npu_flop_registry, *_npu_flop_registry])
    targets = {name: _target_of(name) for name in names}
    return {name: target for name, target in targets.items() if target is not None}
