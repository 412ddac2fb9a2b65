"""Every public signature of torch.npu, torch.npu.amp and torch_npu matches
real torch_npu's, so that keyword callers written against it work here.

The reference is tests/data/torch_npu_signatures.json, generated from real
torch_npu's source by scripts/gen_signature_table.py (which records the
Ascend/pytorch commit it read): for each name in those modules' ``__all__``,
its parameters' names, kinds and defaults. For each name this test takes
vNPU's ``inspect.signature`` and requires the same parameters, in the same
order, of the same kinds, with equal defaults.

Deviations are listed below, each with its reason: names vNPU lacks
(MISSING) and parameters vNPU adds after real torch_npu's (EXTRA_PARAMETERS,
which must have defaults, so that every call written for real torch_npu
still binds). Anything else that differs fails. The custom operators
(``torch_npu.npu_*``) are defined by Ascend/op-plugin's schemas, not by
Python source in Ascend/pytorch, and are not in the table.
"""

import ast
import inspect
import json
import os

import pytest
import torch
import torch_npu

TABLE_PATH = os.path.join(os.path.dirname(__file__), "data", "torch_npu_signatures.json")
with open(TABLE_PATH) as _f:
    TABLE = json.load(_f)

MODULES = {"torch.npu": torch.npu, "torch.npu.amp": torch.npu.amp, "torch_npu": torch_npu}

# Real torch_npu's names that vNPU does not have, and why.
MISSING = {}

# Parameters vNPU adds after real torch_npu's, and why. Each must have a default.
EXTRA_PARAMETERS = {
    ("torch.npu", "set_option"): (
        ("value",), "the seeds call set_option('enable_debug', True): a key and a value, besides real torch_npu's "
                    "dict; set_option(dict) binds as it does there"),
    ("torch.npu", "MemPool"): (
        ("device",), "keyword-only: a vNPU pool holds one device's memory, chosen when it is created (default: the "
                     "current device)"),
    ("torch.npu", "NPUGraph"): (
        ("keep_graph",), "keyword-only: torch.cuda.CUDAGraph's keep_graph (capture now, instantiate() later), "
                         "which vNPU's NPUGraph implements; real torch_npu's NPUGraph() takes no argument"),
}

# A default in the table that is not a literal (torch.float16, 2. ** 16) is
# evaluated with these names; the expression may use nothing else.
_DEFAULT_NAMES = {"torch": torch, "torch_npu": torch_npu}
_DEFAULT_NODES = (ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Attribute, ast.BinOp, ast.UnaryOp,
                  ast.operator, ast.unaryop, ast.Tuple, ast.List)


def _real_default(param):
    if "value" in param:
        value = param["value"]
        return tuple(value) if isinstance(value, list) else value
    tree = ast.parse(param["default"], mode="eval")
    bad = [type(n).__name__ for n in ast.walk(tree) if not isinstance(n, _DEFAULT_NODES)]
    assert not bad, f"default {param['default']!r} uses {bad}: teach _real_default to compare it"
    return eval(compile(tree, "<default>", "eval"), {"__builtins__": {}}, dict(_DEFAULT_NAMES))


def _same_default(ours, theirs):
    if isinstance(theirs, bool) or isinstance(ours, bool):
        return type(ours) is type(theirs) and ours == theirs
    if isinstance(theirs, (int, float)) and isinstance(ours, (int, float)):
        return ours == theirs
    return type(ours) is type(theirs) and ours == theirs


def _entries():
    for module, info in TABLE["modules"].items():
        for name, entry in info["names"].items():
            yield pytest.param(module, name, entry, id=f"{module}.{name}")


def test_table_is_generated_from_a_recorded_snapshot():
    assert TABLE["source"] == "https://github.com/Ascend/pytorch"
    assert len(TABLE["commit"]) == 40
    for info in TABLE["modules"].values():
        assert list(info["names"]) == info["all"] and info["all"]
    for module, name in list(MISSING) + list(EXTRA_PARAMETERS):
        assert name in TABLE["modules"][module]["names"], f"{module}.{name} is no longer real torch_npu's: " \
                                                          "drop it from the allow-list"


@pytest.mark.parametrize("module,name,entry", _entries())
def test_signature_matches_real_torch_npu(module, name, entry):
    key = (module, name)
    if key in MISSING:
        assert not hasattr(MODULES[module], name), f"{module}.{name} exists now: remove it from MISSING"
        return
    assert hasattr(MODULES[module], name), f"{module}.{name} is real torch_npu's and missing here"
    if "parameters" not in entry:
        return  # an instance, a module or a dynamically made class (legacy tensor types): the name is what counts
    ours = list(inspect.signature(getattr(MODULES[module], name)).parameters.values())
    theirs = entry["parameters"]
    extra_names, _reason = EXTRA_PARAMETERS.get(key, ((), ""))
    assert [p.name for p in ours] == [p["name"] for p in theirs] + list(extra_names), \
        f"{module}.{name}: parameters {[p.name for p in ours]}, real torch_npu's {[p['name'] for p in theirs]}"
    for mine, real in zip(ours, theirs):
        assert mine.kind.name == real["kind"], f"{module}.{name}({mine.name}): {mine.kind.name}, real {real['kind']}"
        if "default" in real:
            assert mine.default is not inspect.Parameter.empty, f"{module}.{name}({mine.name}) needs a default"
            expected = _real_default(real)
            assert _same_default(mine.default, expected), \
                f"{module}.{name}({mine.name}={mine.default!r}): real torch_npu's default is {real['default']}"
        else:
            assert mine.default is inspect.Parameter.empty, \
                f"{module}.{name}({mine.name}) has default {mine.default!r}, real torch_npu's has none"
    for extra in ours[len(theirs):]:
        assert extra.default is not inspect.Parameter.empty or extra.kind in (
            inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD), \
            f"{module}.{name}: the added parameter {extra.name} needs a default"


@pytest.mark.parametrize("module", ["torch.npu", "torch.npu.amp", "torch_npu"])
def test_all_lists_real_names(module):
    real = TABLE["modules"][module]["all"]
    ours = MODULES[module].__all__
    missing = {name for (m, name) in MISSING if m == module}
    assert set(real) - missing <= set(ours), f"{module}.__all__ lacks {set(real) - missing - set(ours)}"
    assert not missing & set(ours)
    assert all(hasattr(MODULES[module], name) for name in ours)
    if module == "torch.npu":  # exactly real torch_npu's names, in its order
        assert ours == [n for n in real if n not in missing]


def test_keyword_calls_from_the_issue():
    # The calls that failed before (issue 24 A5), written as a real torch_npu user writes them.
    assert torch.npu.get_device_name(device_name=0) == torch.npu.get_device_name(0)
    assert torch.npu.get_device_properties(device_name="npu:0").name == torch.npu.get_device_name()
    assert torch.npu.can_device_access_peer(device_id=0, peer_device_id=1)
    assert torch.npu.is_bf16_supported() == torch.npu.is_bf16_supported(including_emulation=False)
    # GradScaler's fifth positional argument is `dynamic`, the sixth `enabled`.
    scaler = torch.npu.amp.GradScaler(2.0 ** 10, 2.0, 0.5, 100, False, True)
    assert scaler.is_enabled() and scaler._dynamic is False
    assert not torch.npu.amp.GradScaler(2.0 ** 10, 2.0, 0.5, 100, True, False).is_enabled()
