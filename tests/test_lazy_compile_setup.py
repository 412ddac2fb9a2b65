"""The lazy Dynamo / Inductor / torchair / NPU-graph setup (Note [Lazy Dynamo
and Inductor setup], torch_npu/utils/_dynamo.py; Note [Lazy torchair and
npugraph_ex], torch_npu/dynamo/__init__.py). What is imported when is
process state, so most tests run in a fresh interpreter."""

import threading

import pytest
import torch

from conftest import run_python

from torch_npu.utils._run_once import run_once


def _ok(code, **env):
    result = run_python(code, timeout=300, **env)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


_LOADED = """
import sys
def loaded(prefix):
    return [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]
"""


def test_import_installs_only_the_triggers():
    _ok(_LOADED + """
import torch, torch_npu
from torch_npu.utils import _dynamo
from torch_npu import dynamo
for prefix in ("torch._dynamo", "torch._inductor", "torch_npu._inductor", "triton", "torch_npu.dynamo.torchair"):
    assert not loaded(prefix), loaded(prefix)
assert "torch.utils._triton" not in sys.modules  # imported at first use, then patched
assert torch.utils._triton.has_triton is _dynamo.has_triton  # an attribute access is a use, as in real torch_npu
assert any(isinstance(f, _dynamo._DynamoPostImportFinder) for f in sys.meta_path)
assert isinstance(sys.modules["torchair"], dynamo._LazyTorchair)
assert isinstance(sys.modules["npugraph_ex"], dynamo._LazyNpuGraphEx)
assert not _dynamo._lazy_dynamo_setup.has_run and not _dynamo._lazy_inductor_setup.has_run
from torch.utils._triton import has_triton
assert has_triton is _dynamo.has_triton and not has_triton()
""")


def test_importing_dynamo_sets_up_npu_without_inductor():
    _ok(_LOADED + """
import torch, torch_npu
from torch_npu.utils import _dynamo
import torch._dynamo
from torch._dynamo.backends.registry import _COMPILER_FNS
from torch._dynamo.device_interface import get_interface_for_device
assert _dynamo._lazy_dynamo_setup.has_run and not _dynamo._lazy_inductor_setup.has_run
assert not any(isinstance(f, _dynamo._DynamoPostImportFinder) for f in sys.meta_path)  # it left
assert {"npu", "npugraph_ex"} <= set(_COMPILER_FNS)
assert get_interface_for_device("npu").device_count() == torch.npu.device_count()
assert not loaded("torch_npu._inductor")
# npu's trace rules are CUDA's: synchronize in the graph, manual_seed a graph break.
from torch._dynamo.trace_rules import get_torch_obj_rule_map
from torch._dynamo.variables import SkipFunctionVariable, TorchInGraphFunctionVariable
from torch_npu.dynamo import trace_rule
rules = get_torch_obj_rule_map()
assert rules[torch.npu.synchronize] is TorchInGraphFunctionVariable
assert rules[torch.npu.manual_seed] is SkipFunctionVariable
assert torch._dynamo.trace_rules.torch_name_rule_map.count(trace_rule.skip_functions_npu) == 1
# Found through the loaded modules: no second copy under a torch.npu.* name.
assert [n for n in sys.modules if n.startswith("torch.npu.")] == []
# Graph-safe RNG, as for CUDA: the default generator's state is swapped in place and replays draws.
from torch._functorch._aot_autograd.utils import get_default_generator, supports_graphsafe_rng
assert supports_graphsafe_rng(torch.device("npu"))
generator = get_default_generator(torch.device("npu:0"))
saved = generator.clone_state()
first = torch.rand(5, device="npu")
generator.graphsafe_set_state(saved)
assert torch.equal(torch.rand(5, device="npu"), first)
""")


def test_dynamo_imported_before_torch_npu_is_set_up_at_import():
    _ok("""
import torch, torch._dynamo, torch_npu
from torch_npu.utils import _dynamo
assert _dynamo._lazy_dynamo_setup.has_run
assert torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2, device="npu")).cpu().tolist() == [2, 2]
""", TORCH_DEVICE_BACKEND_AUTOLOAD="0")


def test_backends_are_listed_before_any_compilation():
    _ok(_LOADED + """
import torch, torch_npu
from torch_npu.utils import _dynamo
assert {"npu", "npugraph_ex", "npugraphs"} <= set(torch.compiler.list_backends(exclude_tags=None))
assert _dynamo._lazy_dynamo_setup.has_run and not _dynamo._lazy_inductor_setup.has_run
assert not loaded("torch_npu._inductor")
""")


def test_inductor_is_set_up_at_the_first_compilation_not_at_torch_compile():
    _ok(_LOADED + """
import torch, torch_npu
from torch_npu.utils import _dynamo
f = lambda x: torch.sin(x) * 2 + 1
compiled = torch.compile(f)
assert _dynamo._lazy_dynamo_setup.has_run and not _dynamo._lazy_inductor_setup.has_run
assert not loaded("torch_npu._inductor")
x = torch.randn(16, device="npu")
torch.testing.assert_close(compiled(x), f(x))
assert _dynamo._lazy_inductor_setup.has_run and _dynamo.is_inductor_npu_initialized()
import torch._inductor.config as config
assert config.npu_backend == "default" and config.enable_shape_handling is False
""")


def test_compile_fx_called_by_a_custom_backend_sets_up_npu():
    # A backend of the user's own that calls Inductor's compile_fx directly
    # (as vLLM's do): the npu graph is still set up and compiled for npu.
    _ok("""
import torch, torch_npu
from torch_npu.utils import _dynamo
def backend(gm, example_inputs):
    from torch._inductor.compile_fx import compile_fx
    return compile_fx(gm, example_inputs)
f = lambda x: torch.relu(x) @ x.t() + x.sum()
x = torch.randn(8, 8, device="npu")
torch.testing.assert_close(torch.compile(f, backend=backend)(x), f(x))
assert _dynamo._lazy_inductor_setup.has_run
""")


def test_step_marker_needs_no_compiler():
    _ok(_LOADED + """
import inspect, torch, torch_npu
from torch_npu.npu._graph_tree_state import MarkStepBox
marker = torch.compiler.npugraph_mark_step_begin
assert marker.__name__ == "npugraph_mark_step_begin" and str(inspect.signature(marker)) == "()"
marker(); marker()
assert MarkStepBox.mark_step_counter == -2
assert not loaded("torch._dynamo") and not loaded("torch._inductor")
""")


def test_torchair_proxy_loads_at_an_import_statement_only():
    _ok("""
import sys, torch, torch_npu
proxy = sys.modules["torchair"]
assert getattr(proxy, "__warningregistry__", None) is None and not hasattr(proxy, "get_npu_backend")
try:
    proxy.get_npu_backend
except AttributeError as e:
    assert "Try to get torchair's attr `get_npu_backend` before torchair is initialized." in str(e)
assert proxy._torchair is None and "torch_npu.dynamo.torchair" not in sys.modules
import torchair
assert torchair is proxy and proxy._torchair is sys.modules["torch_npu.dynamo.torchair"]
torchair.get_npu_backend()
# One copy of each module under both names.
assert sys.modules["torchair.npu_fx_compiler"] is sys.modules["torch_npu.dynamo.torchair.npu_fx_compiler"]
from torchair.configs.compiler_config import CompilerConfig
from torch_npu.dynamo.torchair.configs import compiler_config
assert CompilerConfig is compiler_config.CompilerConfig
assert compiler_config.__spec__.name == "torch_npu.dynamo.torchair.configs.compiler_config"
assert torchair.npu_fx_compiler is sys.modules["torchair.npu_fx_compiler"]
""")


def test_a_failed_lazy_load_is_raised_again_at_each_use():
    _ok("""
import torch, torch_npu
from torch_npu import dynamo
proxy = dynamo._LazyTorchair("no_such_package")
for _ in range(2):
    try:
        proxy.__spec__
    except ModuleNotFoundError as e:
        assert "no_such_package" in str(e) and "imported at its first use" in str(e)
    else:
        raise AssertionError("the load must fail")
""")


def test_npu_backend_option_is_checked_and_other_generators_compile_as_default():
    _ok("""
import os, warnings, torch, torch_npu
from torch_npu.utils import _dynamo
try:
    torch.compile(lambda x: x + 1, options={"npu_backend": 1})
except RuntimeError as e:
    assert "Unexpected type of attr npu_backend" in str(e)
else:
    raise AssertionError("a non-string npu_backend must be refused")
assert not _dynamo._lazy_inductor_setup.has_run
f = lambda x: torch.cos(x) + x
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    compiled = torch.compile(f, options={"npu_backend": "mlir"})
assert any("npu_backend='mlir' is compiled as 'default'" in str(w.message) for w in caught), caught
x = torch.randn(8, device="npu")
torch.testing.assert_close(compiled(x), f(x))
assert "TORCHINDUCTOR_NPU_BACKEND" not in os.environ  # the scope put it back
""")


def test_backend_scope_restores_the_environment_when_entering_fails():
    _ok("""
import os, torch_npu
from torch_npu.utils import _dynamo
os.environ["TORCHINDUCTOR_NPU_BACKEND"] = "default"
try:
    with _dynamo._NpuBackendScope(1):
        pass
except TypeError:
    pass
else:
    raise AssertionError("a non-string backend must fail")
assert os.environ["TORCHINDUCTOR_NPU_BACKEND"] == "default"
""")


def test_shape_handling_set_up_by_the_wrapper_pads_to_gears():
    # torch.compile installs the hook; npu's Inductor backend loads at the first call.
    _ok(_LOADED + """
import torch, torch_npu
from torch._dynamo.utils import counters
f = lambda x: x * 2 + 1
compiled = torch.compile(f, options={"enable_shape_handling": True}, dynamic=False)
assert not loaded("torch_npu._inductor"), loaded("torch_npu._inductor")
for batch in (3, 4):  # both run as the gear 4
    x = torch.randn(batch, 4, device="npu")
    torch.testing.assert_close(compiled(x), f(x))
assert counters["stats"]["unique_graphs"] == 1, counters["stats"]
""")


def test_backend_registration_completes_after_a_failed_attempt():
    _ok("""
import torch, torch_npu, torch._dynamo
from torch._dynamo.backends import registry
import torch_npu.dynamo as npu_dynamo
for name in ("npu", "npugraph_ex"):
    registry._BACKENDS.pop(name, None); registry._COMPILER_FNS.pop(name, None)
original = npu_dynamo._register_npu_backend
def failing(backend, name="npu"):
    if name == "npugraph_ex":
        raise RuntimeError("injected")
    return original(backend, name)
npu_dynamo._register_npu_backend = failing
try:
    npu_dynamo._register_backends()
except RuntimeError:
    pass
npu_dynamo._register_npu_backend = original
assert "npu" in registry._COMPILER_FNS and "npugraph_ex" not in registry._COMPILER_FNS
npu_backend = registry._COMPILER_FNS["npu"]
npu_dynamo._register_backends()
assert registry._COMPILER_FNS["npu"] is npu_backend and "npugraph_ex" in registry._COMPILER_FNS
""")


def test_compiler_reset_drops_the_recorded_npu_graphs():
    _ok(_LOADED + """
import torch, torch_npu
f = lambda x: torch.sin(x) * 3
compiled = torch.compile(f, backend="npugraphs")
assert not loaded("torch_npu.npu._graph_tree")
x = torch.randn(16, device="npu")
for _ in range(3):  # warm-up, capture, replay
    torch.testing.assert_close(compiled(x), f(x))
from torch_npu.npu import _graph_tree
manager = _graph_tree.get_manager(0)
assert manager.node_count() == 1 and len(manager.warned_functions) == 0
import gc, weakref
dropped = [weakref.ref(manager), weakref.ref(next(manager.get_roots()))]
del manager
torch.compiler.reset()  # drops the compiled functions, and with the last of them the tree
assert _graph_tree.get_manager(0, create_if_none_exists=False) is None
gc.collect()
assert all(ref() is None for ref in dropped)
compiled = torch.compile(f, backend="npugraphs")
for _ in range(3):
    torch.testing.assert_close(compiled(x), f(x))
assert _graph_tree.get_manager(0).node_count() == 1
from torch_npu.utils._graph_tree import NpugraphsBackend
try:
    NpugraphsBackend()(None, [], options={})
except TypeError as e:
    assert "unexpected keyword argument 'options'" in str(e)
else:
    raise AssertionError("npugraphs takes no options")
""")


def test_fsdp_scaler_is_npus_whether_fsdp_is_imported_before_or_after():
    for first, second in (("torch.distributed.fsdp", "torch_npu"), ("torch_npu", "torch.distributed.fsdp")):
        _ok(f"""
import torch, {first}, {second}
from torch.distributed.fsdp import sharded_grad_scaler
import torch_npu
assert sharded_grad_scaler.ShardedGradScaler is torch_npu._ShardedGradScaler
assert torch_npu._ShardedGradScaler()._device == "npu"
""")


def test_traced_npu_events_keep_their_class():
    # isinstance(e, torch.npu.Event) holds in traced code as eagerly: the
    # compiled function must take the branch the eager one takes.
    torch._dynamo.reset()

    def fn(x):
        event = torch.npu.Event()
        event.record()
        return x * 2 if isinstance(event, torch.npu.Event) else x

    x = torch.arange(4.0, device="npu")
    assert torch.equal(torch.compile(fn, backend="eager")(x).cpu(), fn(x).cpu())


def test_run_once_retries_after_a_failure_and_returns_on_reentry():
    calls = []

    @run_once
    def step(fail):
        calls.append(fail)
        step(False)  # re-entered by the same thread: returns at once
        if fail:
            raise RuntimeError("first try fails")

    with pytest.raises(RuntimeError):
        step(True)
    assert not step.has_run
    step(False)
    step(False)
    assert step.has_run and calls == [True, False]


def test_run_once_makes_other_threads_wait_for_the_running_step():
    started, release, calls = threading.Event(), threading.Event(), []

    @run_once
    def step():
        started.set()
        release.wait(10)
        calls.append(1)

    first = threading.Thread(target=step)
    first.start()
    started.wait(10)
    seen = []
    second = threading.Thread(target=lambda: (step(), seen.append(step.has_run)))
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waiting for the first call
    release.set()
    first.join(10)
    second.join(10)
    assert calls == [1] and seen == [True]


def test_disabled_registration_leaves_inductor_without_an_npu_backend():
    _ok("""
import torch, torch_npu
from torch_npu.utils import _dynamo
_dynamo.disable_register_inductor_npu()
x = torch.randn(4, 4).npu()
try:
    torch.compile(lambda a: a - 1)(x)
except Exception as e:
    assert "registration is disabled" in str(e), e
else:
    raise AssertionError("compiled without an npu backend")
assert not _dynamo.is_inductor_npu_initialized()
_dynamo.enable_register_inductor_npu()
torch._dynamo.reset()
assert torch.equal(torch.compile(lambda a: a - 1)(x).cpu(), (x - 1).cpu())
""")
