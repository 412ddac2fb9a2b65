"""npu's trace rules: how Dynamo treats ``torch.npu.*`` and ``torch_npu._C``
functions met in traced code (part of the Dynamo setup, torch_npu/utils/_dynamo.py).

Dynamo's own tables (torch._dynamo.trace_rules) classify CUDA's functions:
put in the graph (``torch.cuda.current_stream``, ``torch.cuda.synchronize``,
the memory statistics), or a graph break (``torch.cuda.manual_seed``,
``torch.cuda.set_device``). Unlisted, npu's counterparts would be stepped
into, and torch_npu's Python over its C extension breaks the graph anyway.
npu's rules are CUDA's, name for name: each ``torch.cuda.X`` rule gives
``torch.npu.X`` the same rule, and each ``torch._C._cuda_X`` rule gives
``torch_npu._C._npu_X`` (real torch_npu's names for its bindings), where
vNPU has that function; each rule names the function by its own module
(``torch_npu.npu.utils.synchronize``). The three tables below are those rules, split as
real torch_npu names them; they are appended to Dynamo's once.

The device queries fold to constants, as CUDA's do: the current device and
whether npu is initialised under a guard that recompiles when they change,
availability, the device count and a device's properties plainly.
"""

import sys

import torch
from torch._dynamo import trace_rules
from torch._dynamo.variables import SkipFunctionVariable, TorchInGraphFunctionVariable

from torch_npu.npu.device import _NPUDeviceProperties

__all__ = []

_NAME_PAIRS = (("torch.cuda.", "torch.npu."), ("torch._C._cuda_", "torch_npu._C._npu_"))


def _loaded_object(name):
    """The object ``name`` names, found through loaded modules only, or None.
    Importing ``torch.npu.graphs`` (as Dynamo's loader would) would load a
    second copy of torch_npu.npu.graphs: torch.npu is torch_npu.npu, and
    only that name is registered."""
    module_name, _, path = name.partition(".")
    module_name = "torch_npu" if module_name == "torch_npu" else "torch"
    obj = sys.modules[module_name]
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _canonical_name(obj):
    """``module.qualname`` of ``obj`` when that finds it in a loaded module, else None."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    qualname = getattr(obj, "__qualname__", "")
    if module is None or not qualname:
        return None
    found = module
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return f"{module.__name__}.{qualname}" if found is obj else None


def _npu_rules():
    rules = {}
    for table in trace_rules.torch_name_rule_map:
        for name, rule in table.items():
            for cuda, npu in _NAME_PAIRS:
                if name.startswith(cuda):
                    npu_name = npu + name[len(cuda):]
                    obj = _loaded_object(npu_name)
                    if obj is None:
                        continue
                    # A binding of torch_npu._C is named there (its own __module__ may be unset).
                    canonical = npu_name if npu == "torch_npu._C._npu_" else _canonical_name(obj)
                    if canonical is not None:
                        rules[canonical] = rule
    return rules


def _split(rules):
    c_binding, non_c_binding, skip = {}, {}, {}
    for name, rule in rules.items():
        if rule is SkipFunctionVariable:
            skip[name] = rule
        elif rule is TorchInGraphFunctionVariable:
            (c_binding if name.startswith("torch_npu._C.") else non_c_binding)[name] = rule
    return c_binding, non_c_binding, skip


torch_c_binding_in_graph_functions_npu, torch_non_c_binding_in_graph_functions_npu, skip_functions_npu = \
    _split(_npu_rules())


def _patch_npu_trace_rules():
    from torch._dynamo.utils import common_constant_types
    from torch._dynamo.variables import torch as torch_variables

    rule_map = trace_rules.torch_name_rule_map
    for table in (torch_non_c_binding_in_graph_functions_npu, torch_c_binding_in_graph_functions_npu,
                  skip_functions_npu):
        if not any(t is table for t in rule_map):
            rule_map.append(table)
    trace_rules.clear_lru_cache()  # the object map is built once from the name maps

    guarded = (torch.npu.current_device, torch.npu.is_initialized)
    plain = (torch.npu.is_available, torch.npu.device_count, torch.npu.get_device_properties,
             torch.npu.get_device_name)
    for fn in guarded:
        torch_variables.constant_fold_functions_need_guards[fn] = True
    for fn in guarded + plain:
        torch_variables.constant_fold_functions[fn] = True
    common_constant_types.add(_NPUDeviceProperties)
