"""NpuGraphOpHandler's default hooks and the handler registry
(torch_npu/npu/_npugraph_handlers/npugraph_handler.py), without a capture."""

import logging

import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.npu._npugraph_handlers.npugraph_handler import (_NPU_GRAPH_OP_HANDLERS, NpuGraphOpHandler,
                                                                register_npu_graph_handler)


@pytest.fixture
def registry():
    saved = dict(_NPU_GRAPH_OP_HANDLERS)
    yield _NPU_GRAPH_OP_HANDLERS
    _NPU_GRAPH_OP_HANDLERS.clear()
    _NPU_GRAPH_OP_HANDLERS.update(saved)


class _Record:
    """What graphs.py records for one captured call, as far as the handler reads it."""

    def __init__(self, name, args, kwargs):
        self.op_cache_entry = type("Op", (), {"__name__": name})()
        self.args, self.kwargs = list(args), dict(kwargs)


def test_registration_takes_one_name_or_a_list_and_warns_when_it_replaces(registry, caplog):
    class First(NpuGraphOpHandler):
        pass

    class Second(NpuGraphOpHandler):
        pass

    assert register_npu_graph_handler("vnpu_op")(First) is First
    register_npu_graph_handler(("vnpu_op.default", "vnpu_op.out"))(First)
    assert all(registry[n] is First for n in ("vnpu_op", "vnpu_op.default", "vnpu_op.out"))
    with caplog.at_level(logging.WARNING):
        register_npu_graph_handler(["vnpu_op"])(First)  # the same class again: silent
        assert not caplog.records
        register_npu_graph_handler(["vnpu_op"])(Second)
    assert registry["vnpu_op"] is Second and registry["vnpu_op.out"] is First
    assert "NpuGraphOpHandler for 'vnpu_op' is being overridden: First -> Second" in caplog.text
    for bad in ("", 3):
        with pytest.raises(TypeError, match="operator names are non-empty strings"):
            register_npu_graph_handler([bad])(First)


def test_default_hooks_pass_the_call_through():
    def func(x):
        return x

    args, kwargs = (1, 2), {"k": 3}
    assert NpuGraphOpHandler.prepare_capture(func, args, kwargs) == (func, args, kwargs)
    assert NpuGraphOpHandler.postprocess_result("result", kwargs) == "result"
    assert NpuGraphOpHandler.get_update_specs("anything") == []


def test_update_args_replaces_what_the_specs_name_and_only_that():
    class Handler(NpuGraphOpHandler):
        UPDATE_SPECS = {"op.default": [("arg", 1, "lengths"), ("arg", 4, "beyond"), ("kwarg", "scale", "factor")]}

    record = _Record("op.default", ["q", [8, 8], "v"], {"scale": 1.0, "mode": "a"})
    Handler.update_args(record, {"lengths": [3, 5], "beyond": 7, "factor": 0.5, "unrelated": 1})
    # argument 4 was not passed at capture: left out rather than appended
    assert record.args == ["q", [3, 5], "v"] and record.kwargs == {"scale": 0.5, "mode": "a"}
    Handler.update_args(record, {})  # no keys: nothing changes
    assert record.args == ["q", [3, 5], "v"]
    other = _Record("op.out", ["q", [8]], {})  # another overload, no specs
    Handler.update_args(other, {"lengths": [1]})
    assert other.args == ["q", [8]]


def test_recorded_kwargs_view_npu_tensors_and_copy_the_rest():
    t = torch.arange(4.0, device="npu")
    host = torch.arange(3.0)
    lengths = [4, 2]
    wrap = NpuGraphOpHandler.record_wrap_kwarg
    assert wrap("x", None, ["x"]) is None
    viewed = wrap("x", t, ["x"])
    # a view of the same memory: an update or a replay writes where the captured kernels read
    assert viewed is not t and viewed.data_ptr() == t.data_ptr() and viewed.device.type == "npu"
    copied = wrap("x", t, [])  # not one of the schema's tensor parameters: copied
    assert copied.data_ptr() != t.data_ptr() and torch.equal(copied.cpu(), t.cpu())
    got = wrap("lengths", lengths, [])
    assert got == lengths and got is not lengths
    mixed = wrap("many", (t, host, 5), [])
    assert isinstance(mixed, tuple) and mixed[0].data_ptr() == t.data_ptr()
    assert mixed[1].data_ptr() != host.data_ptr() and torch.equal(mixed[1], host) and mixed[2] == 5
