"""Which function's calls the profiler counts FLOPs for, and with which formula.

An entry maps an operator name to (formula, target): the formula takes the
operator's own arguments and returns its floating-point operation count;
the target ("module:attribute", e.g. "torch_npu:npu_fusion_attention") is
the function _flops_hook wraps while a profile with ``with_flops`` and mstx
runs. vNPU's built-in formulas (_flops_formulas.py) register as defaults;
``register_npu_flop`` without ``is_default`` registers a user's (or an
extension's) formula, which takes precedence, keeping the default's target
when it names none.
"""

import logging

logger = logging.getLogger(__name__)

_default_npu_flop_registry = {}  # op name -> (formula, target or None): vNPU's own
_npu_flop_registry = {}  # the same, registered by users: consulted first


def register_npu_flop(target=None, op_name=None, *, is_default=False):
    """Decorator registering a FLOPs formula for ``op_name`` (default: the
    target's attribute, else the formula's name)."""
    def register(formula):
        if op_name is not None:
            name = op_name
        elif target is not None and ":" in target:
            name = target.split(":", 1)[1]
        else:
            name = formula.__name__
        registry = _default_npu_flop_registry if is_default else _npu_flop_registry
        if not is_default and name in registry:
            logger.error("Duplicate external FLOPs registration for %s. The later registration takes precedence.",
                         name)
        registry[name] = (formula, target)
        return formula
    return register


def get_flop_func(op_name):
    """The formula counting ``op_name``'s FLOPs (a user's first), or None."""
    entry = _npu_flop_registry.get(op_name) or _default_npu_flop_registry.get(op_name)
    return None if entry is None else entry[0]


def get_npu_flop_targets():
    """op name -> "module:attribute" of every operator with a target."""
    targets = {}
    for registry in (_default_npu_flop_registry, _npu_flop_registry):
        targets.update({name: target for name, (_, target) in registry.items() if target is not None})
    return targets
