"""torch_npu._C._op_route: which route an op takes on npu, and why.

The answer comes from the registry the registration sites fill in
(csrc/launch/op_route.h). The test's oracle is independent of it: the
dispatcher records where each kernel was registered (file and line, or
"[backend fallback]"), and that location names the route.
"""

import pytest
import torch

import torch_npu
from torch_npu import _C

from conftest import run_python


def _dispatch_entry(op, key):
    """The dispatcher's computed-table line of `op` for `key`: "registered at FILE:LINE [kind]"."""
    for line in torch._C._dispatch_dump_table(op).splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    return ""


def _route_by_registration_site(op):
    """The route the dispatcher's record of the PrivateUse1 kernel implies, or None if it cannot tell."""
    if "torch_npu/_ascend_semantics.py" in _dispatch_entry(op, "AutogradPrivateUse1"):
        return "ascend_semantics"  # a composite op given an npu kernel above autograd
    entry = _dispatch_entry(op, "PrivateUse1")
    if "structured_kernels_" in entry:
        return "structured"
    if "csrc/launch/boxed_kernel.cpp" in entry:
        return "policy_table"
    if "csrc/launch/sync_kernel.cpp" in entry:
        return "sync_native"
    if "torch_npu/_ascend_semantics.py" in entry:
        return "ascend_semantics"
    if "torch_npu/op_plugin/" in entry:
        return "python_composite"
    if "/csrc/" in entry and "[kernel]" in entry and "/__w/pytorch/" not in entry:
        return "hand_written"
    if "[math kernel]" in entry or "RegisterComposite" in entry:
        return "composite"
    if "[backend fallback]" in entry:
        return "cpu_fallback" if _dispatch_entry(op, "CPU").startswith("registered at") else None
    return None


def _all_ops(namespaces=("aten", "npu")):
    names = []
    for name in torch._C._dispatch_get_all_op_names():
        if name.split("::", 1)[0] in namespaces:
            names.append(name)
    return names


def test_the_named_routes():
    assert _C._op_route("aten::add.Tensor")[0] == "structured"
    assert _C._op_route("add.Tensor")[0] == "structured"  # aten:: implied
    assert _C._op_route("aten::nonzero")[0] == "sync_native"
    assert _C._op_route("aten::one_hot")[0] == "ascend_semantics"
    assert _C._op_route("npu::npu_rms_norm")[0] == "python_composite"
    assert _C._op_route("aten::linear")[0] == "composite"
    assert _C._op_route("aten::_copy_from")[0] == "hand_written"
    # copy_ itself is ATen's backend-generic kernel, which calls _copy_from.
    assert _C._op_route("aten::copy_")[0] == "composite"
    # Kept from the sync-native route on purpose (torch_npu/_registration.py).
    assert _C._op_route("aten::to_mkldnn")[0] == "cpu_fallback"
    route, reason = _C._op_route("aten::add.Tensor")
    assert "meta function" in reason


def test_every_op_agrees_with_where_the_dispatcher_says_it_was_registered():
    checked, disagree = 0, []
    for op in _all_ops():
        expected = _route_by_registration_site(op)
        if expected is None:
            continue
        checked += 1
        route = _C._op_route(op)[0]
        if route != expected:
            disagree.append((op, route, expected, _dispatch_entry(op, "PrivateUse1")))
    assert not disagree, f"{len(disagree)} of {checked} disagree, e.g. {disagree[:5]}"
    # Every route of a normal import is represented.
    routes = {_C._op_route(op)[0] for op in _all_ops()}
    assert {"structured", "hand_written", "policy_table", "sync_native", "python_composite",
            "ascend_semantics", "composite", "cpu_fallback"} <= routes
    assert checked > 2000


def test_a_kernel_registered_after_import_is_reported_as_such():
    res = run_python("""
        import torch, torch_npu
        from torch_npu import _C
        lib = torch.library.Library("vnpu_route_test", "DEF")
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda x: x * 2, "PrivateUse1")
        print(_C._op_route("vnpu_route_test::twice")[0])
        """)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["registered_later"]


def test_strict_mode_keeps_the_route_and_says_it_wraps():
    # celu: real torch_npu has a kernel; here ATen decomposes it.
    res = run_python("""
        import torch, torch_npu
        from torch_npu import _C
        before = _C._op_route("aten::celu")
        torch.npu.set_check_mode(True)
        during = _C._op_route("aten::celu")
        torch.npu.set_check_mode(False)
        after = _C._op_route("aten::celu")
        print(before[0], during[0], after[0], "Strict mode wraps" in during[1], "Strict mode" in after[1])
        """)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["composite", "composite", "composite", "True", "False"]


def test_python_registration_sites_may_only_note_python_routes():
    with pytest.raises(ValueError, match="'python_composite' or 'ascend_semantics' ops, got 'structured'"):
        _C._note_op_route("aten::add.Tensor", "structured")
    assert _C._op_route("aten::add.Tensor")[0] == "structured"  # unchanged


@pytest.mark.parametrize("bad", ["aten::no_such_op", "no_such_op.overload", "npu::"])
def test_unknown_ops_are_a_value_error_that_says_how_to_name_one(bad):
    with pytest.raises(ValueError, match="unknown operator .*'aten::add.Tensor'"):
        _C._op_route(bad)
