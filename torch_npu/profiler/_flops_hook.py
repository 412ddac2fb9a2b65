"""FLOPs of the operators a profile runs, as mstx ranges (MFU analysis).

While a profile with ``with_flops=True`` and mstx (``_ExperimentalConfig(mstx=True)``)
runs, every function _flops_registry names is wrapped: a call whose formula
gives N FLOPs runs inside the mstx range "N-<op name>" of domain "mfu_flops",
which the trace keeps, so FLOPs per step (and MFU) can be read back from the
profile. Only the outermost counted call on a thread is ranged: a fused
operator whose composition calls torch.matmul is counted once. A formula
that fails on some arguments leaves that call unranged.

Besides the target attribute, module attributes bound to the same function
(``from torch_npu import npu_fusion_attention`` in a user's module) are
wrapped too; ``uninstall`` puts every one back.
"""

import functools
import importlib
import logging
import sys
import threading

from torch_npu.npu.mstx import mstx
from torch_npu.profiler._flops_registry import get_flop_func, get_npu_flop_targets

logger = logging.getLogger(__name__)

_DOMAIN = "mfu_flops"


def _resolve(target):
    """(object holding the attribute, attribute name) of "module:a.b.c", or None."""
    module_name, _, path = target.partition(":")
    if not path:
        logger.warning("Invalid FLOPs target %r: expected 'module:attribute'", target)
        return None
    try:
        owner = importlib.import_module(module_name)
    except ImportError:
        logger.warning("Cannot import the module of FLOPs target %r", target)
        return None
    *parents, name = path.split(".")
    for part in parents:
        owner = getattr(owner, part, None)
        if owner is None:
            logger.warning("Cannot resolve FLOPs target %r", target)
            return None
    return owner, name


def _default_targets():
    import torch_npu.profiler._flops_formulas  # noqa: F401  (registers the built-in formulas)
    resolved = {}
    for op_name, target in get_npu_flop_targets().items():
        found = _resolve(target)
        if found is not None:
            resolved[op_name] = found
    return resolved


class FlopsHookManager:
    """Installs and removes the FLOPs wrappers (one installation at a time)."""

    _state = threading.local()
    _patched = []  # (owner, attribute name, original) in installation order
    _installed = False

    @classmethod
    def _wrap(cls, op_name, original):
        @functools.wraps(original)
        def counted(*args, **kwargs):
            if getattr(cls._state, "depth", 0) > 0:
                return original(*args, **kwargs)
            formula = get_flop_func(op_name)
            try:
                flops = formula(*args, **kwargs) if formula is not None else None
            except Exception as error:  # a formula must never break the program
                logger.debug("FLOPs formula of %s failed: %s", op_name, error)
                flops = None
            cls._state.depth = 1
            try:
                if flops is None:
                    return original(*args, **kwargs)
                range_id = mstx.range_start(f"{flops}-{op_name}", domain=_DOMAIN)
                try:
                    return original(*args, **kwargs)
                finally:
                    mstx.range_end(range_id, domain=_DOMAIN)
            finally:
                cls._state.depth = 0
        counted._vnpu_flops_original = original
        return counted

    @classmethod
    def install(cls, target_ops=None):
        """Wraps each op's function: ``target_ops`` maps op name -> (owner, attribute);
        by default, every registered target."""
        if cls._installed:
            return
        targets = _default_targets() if target_ops is None else target_ops
        for op_name, (owner, name) in targets.items():
            original = getattr(owner, name, None)
            if original is None or hasattr(original, "_vnpu_flops_original"):
                continue
            wrapper = cls._wrap(op_name, original)
            holders = [(owner, name)]
            for module in list(sys.modules.values()):
                try:
                    same = module is not None and module is not owner and getattr(module, name, None) is original
                except Exception:  # lazy modules may raise anything from __getattr__
                    same = False
                if same:
                    holders.append((module, name))
            for holder, attribute in holders:
                try:
                    setattr(holder, attribute, wrapper)
                except (AttributeError, TypeError):
                    continue
                cls._patched.append((holder, attribute, original))
        cls._installed = True

    @classmethod
    def uninstall(cls):
        """Puts every wrapped function back."""
        for holder, attribute, original in reversed(cls._patched):
            setattr(holder, attribute, original)
        cls._patched = []
        cls._installed = False
