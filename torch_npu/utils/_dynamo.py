"""torch_npu's part of Dynamo and Inductor, set up when they are first used.

Note [Lazy Dynamo and Inductor setup]
``import torch_npu`` imports neither Dynamo, Inductor, torch_npu._inductor nor
triton (tests/test_inductor_imports.py; a program that never compiles pays
nothing for them). What it does install (``add_dynamo_methods``), each cheap:

- ``_DynamoPostImportFinder`` on sys.meta_path: whoever imports torch._dynamo
  first (``torch.compile``, ``torch.export``, ``list_backends``, a plain
  import), ``_lazy_dynamo_setup`` runs right after Dynamo's own code. If
  Dynamo was imported before torch_npu, it runs at ``import torch_npu``;
- ``has_triton`` as ``torch.utils._triton.has_triton`` (npu is a triton
  device when triton is installed);
- the lazy ``torchair`` and ``npugraph_ex`` packages (torch_npu/dynamo);
- ``torch._TorchCompileInductorWrapper`` taking the npu options
  (``npu_backend``, ``enable_shape_handling``) and setting up Inductor for
  npu (``_NpuBackendScope``) at the first compilation, not at torch.compile;
- Inductor's npu config entries, added when torch._inductor.config loads;
- a wrapper of Inductor's compile_fx, added when it loads: an npu graph
  compiled through it, whatever the caller (torchair's backend, a custom
  backend, ``torch._inductor.compile``), sets up Inductor for npu first and
  is compiled for npu (torch_npu/_inductor/retarget.py);
- ``torch.compiler.npugraph_mark_step_begin`` (torch_npu/npu/_graph_tree_state.py).

``_lazy_dynamo_setup`` (once): npu's device interface; Dynamo's tables taught
npu's streams, events, autocast and device queries; the "npu" and
"npugraph_ex" backends (torch_npu/dynamo); npu's trace rules
(torch_npu/dynamo/trace_rule.py); torchair loaded when torch.compile names
"npu". It imports no Inductor code.

``_lazy_inductor_setup`` (once, at the first compilation with Inductor or
"npugraphs"): torch_npu._inductor (npu's code generation, registered for the
requested ``npu_backend``), the "npugraphs" backend and the step marker
(torch_npu/utils/_graph_tree.py). (The npu config entries are added when
Inductor's config loads, above: nothing here needs to add them again.)
"""

import functools
import os
import sys

import torch

from torch_npu._after_import import _AfterImport, call_after_import
from torch_npu.utils._run_once import run_once

__all__ = []

_NPU_BACKEND_ENV = "TORCHINDUCTOR_NPU_BACKEND"


def _this():
    # The setup steps are looked up here at each call, never bound early:
    # tests (and callers) replace them on the module.
    return sys.modules[__name__]


# --- Dynamo ---------------------------------------------------------------

class _DynamoPostImportFinder(_AfterImport):
    """Runs ``_lazy_dynamo_setup`` right after torch._dynamo's own code."""

    def __init__(self):
        super().__init__("torch._dynamo")

    def after_exec(self, module):
        _this()._lazy_dynamo_setup()


def _install_dynamo_post_import_trigger():
    if "torch._dynamo" in sys.modules:
        _this()._lazy_dynamo_setup()
    elif not any(isinstance(f, _DynamoPostImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _DynamoPostImportFinder())


@run_once
def _dynamo_register_interface_for_device():
    """npu's DeviceInterface for Dynamo (torch_npu/utils/_dynamo_device.py):
    Dynamo traces streams and events through it, with any backend."""
    from torch._dynamo.device_interface import register_interface_for_device

    from torch_npu.utils._dynamo_device import NpuInterface

    register_interface_for_device("npu", NpuInterface)
    for index in range(torch.npu.device_count()):
        register_interface_for_device(f"npu:{index}", NpuInterface)


@functools.lru_cache(None)
def has_triton() -> bool:
    """``torch.utils._triton.has_triton`` with npu among the devices triton
    compiles for: triton is installed and one of cuda, xpu, cpu (with
    triton's cpu backend) or npu is available. Without the triton package
    it is False at once, importing nothing (vNPU's case: npu graphs are
    compiled by Inductor's C++ backend)."""
    from torch.utils._triton import has_triton_package

    if not has_triton_package():
        return False
    from torch._dynamo.device_interface import get_interface_for_device

    def triton_has_cpu_backend():
        import triton.backends
        return "cpu" in triton.backends.backends

    _this()._dynamo_register_interface_for_device()
    extra_checks = {"cuda": lambda: True, "xpu": lambda: True, "cpu": triton_has_cpu_backend, "npu": lambda: True}
    return any(get_interface_for_device(device).is_available() and check()
               for device, check in extra_checks.items())


def _patch_has_triton(_triton):
    _triton.has_triton = has_triton


def patch_has_triton():
    # Patched when torch.utils._triton is imported (Inductor imports it), and
    # the submodule made reachable as ``torch.utils._triton`` before that, as
    # real torch_npu, which imports it at its own import, has it (its
    # test_compile_trigger.py reads the attribute right after ``import
    # torch_npu``). Importing it here instead would cost a third full garbage
    # collection in ``import torch`` (about 80 ms), though the module is small.
    call_after_import("torch.utils._triton", _patch_has_triton)
    _import_on_first_access(torch.utils, "_triton")


def _import_on_first_access(package, name):
    """``package.<name>`` imports the submodule on first access (PEP 562's
    module ``__getattr__``) where it was not imported yet."""
    if "__getattr__" in vars(package):
        return  # the package has its own; leave it
    qualified = f"{package.__name__}.{name}"

    def __getattr__(attribute):
        if attribute == name:
            import importlib
            return importlib.import_module(qualified)
        raise AttributeError(f"module {package.__name__!r} has no attribute {attribute!r}")

    package.__getattr__ = __getattr__


def patch_dynamo_optimize():
    """``torch.compile(..., backend="npu")`` loads torchair at once, so that a
    failure to load it is raised there rather than at the first call."""
    from torch_npu.dynamo import _get_global_npu_backend

    optimize = torch._dynamo.optimize
    if getattr(optimize, "_npu", False):
        return

    @functools.wraps(optimize)
    def npu_optimize(*args, **kwargs):
        backend = kwargs.get("backend", args[0] if len(args) == 1 else None)
        name = backend if isinstance(backend, str) else getattr(backend, "compiler_name", None)
        if name == "npu":
            _get_global_npu_backend(name)
        return optimize(*args, **kwargs)

    npu_optimize._npu = True
    torch._dynamo.optimize = npu_optimize


_COMPLETED_DYNAMO_SETUP_STEPS = set()


def _run_dynamo_setup_step(name, step):
    """Each step of the Dynamo setup succeeds once: a retry after a failed
    later step does not repeat (or duplicate) the earlier ones."""
    if name not in _COMPLETED_DYNAMO_SETUP_STEPS:
        step()
        _COMPLETED_DYNAMO_SETUP_STEPS.add(name)


@run_once
def _lazy_dynamo_setup():
    """npu's part of Dynamo, once Dynamo is imported (Note [Lazy Dynamo and Inductor setup])."""
    from torch_npu.dynamo import _register_backends
    from torch_npu.dynamo.trace_rule import _patch_npu_trace_rules
    from torch_npu.utils._dynamo_variables import teach_dynamo_npu

    _run_dynamo_setup_step("device_interface", _this()._dynamo_register_interface_for_device)
    _run_dynamo_setup_step("variables", teach_dynamo_npu)
    _run_dynamo_setup_step("backends", _register_backends)
    _run_dynamo_setup_step("trace_rules", _patch_npu_trace_rules)
    _run_dynamo_setup_step("dynamo_optimize", patch_dynamo_optimize)
    _run_dynamo_setup_step("graphsafe_rng", _register_graphsafe_rng)


def _register_graphsafe_rng():
    """npu's generator can swap its state in place (graphsafe_get_state /
    graphsafe_set_state, csrc/core/npu_generator.h), which is what AOTAutograd's
    RNG functionalization needs to replay random ops in captured graphs, as
    for CUDA: torch._functorch's supports_graphsafe_rng(npu) is then True."""
    from torch._functorch._aot_autograd import utils

    if hasattr(utils, "register_graphsafe_rng_device_type") and \
            not utils.supports_graphsafe_rng(torch.device("npu")):
        utils.register_graphsafe_rng_device_type("npu")


# --- Inductor -------------------------------------------------------------

# Inductor's config entries for npu (torch._inductor.config.npu_backend, ...),
# as real torch_npu adds them: (name, default, type).
_NPU_INDUCTOR_CONFIG = (
    ("npu_backend", "default", str),
    ("enable_shape_handling", False, bool),
    ("shape_handling_configs", [], list),
    ("shape_handling_dict", None, dict),
)


def _add_npu_inductor_config(config):
    """Adds the npu entries to Inductor's config module (when it loads)."""
    from torch.utils._config_module import Config, _ConfigEntry

    added = False
    for name, default, value_type in _NPU_INDUCTOR_CONFIG:
        if name not in config._config:
            config._config[name] = _ConfigEntry(Config(default=default, value_type=value_type), name)
            added = True
    if added:  # the module caches its dict and hash; both now miss the new entries
        config._hash_dirty_var.set(True)
        config._get_dict_dirty_keys_var.set(None)


class _InductorNpuRegistry:
    """Which ``npu_backend`` torch_npu._inductor has registered for."""

    _disabled_register = False
    _loaded_backend = None

    @classmethod
    def register_inductor_npu(cls):
        if cls._disabled_register:
            return
        backend = os.environ.get(_NPU_BACKEND_ENV, "default")
        if cls._loaded_backend != backend:
            if "torch_npu._inductor" in sys.modules:
                sys.modules["torch_npu._inductor"]._load_backend()
            else:
                import torch_npu._inductor  # noqa: F401  (its import loads the backend)
            cls._loaded_backend = backend

    @classmethod
    def has_initialized(cls):
        return cls._loaded_backend is not None


def register_inductor_npu():
    _InductorNpuRegistry.register_inductor_npu()


def is_inductor_npu_initialized():
    return _InductorNpuRegistry.has_initialized()


def disable_register_inductor_npu():
    _InductorNpuRegistry._disabled_register = True


def enable_register_inductor_npu():
    _InductorNpuRegistry._disabled_register = False


def _resolve_npu_backend(selected=None):
    """The npu_backend of one compilation: its options, else Inductor's config, else the environment."""
    if selected not in (None, "", "default"):
        return selected
    config = sys.modules.get("torch._inductor.config")
    configured = getattr(config, "npu_backend", None)
    if configured not in (None, "", "default"):
        return configured
    return os.environ.get(_NPU_BACKEND_ENV, "default")


class _NpuBackendScope:
    """One compilation's ``npu_backend``: named by TORCHINDUCTOR_NPU_BACKEND
    while it compiles, with Inductor set up for npu, and the environment
    put back afterwards (also when entering fails)."""

    def __init__(self, backend):
        self.backend = backend
        self._saved = None

    def __enter__(self):
        self._saved = os.environ.get(_NPU_BACKEND_ENV)
        try:
            os.environ[_NPU_BACKEND_ENV] = self.backend
            _this().register_inductor_npu()
            _this()._lazy_inductor_setup()
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        self._restore()
        return False

    def _restore(self):
        if self._saved is None:
            os.environ.pop(_NPU_BACKEND_ENV, None)
        else:
            os.environ[_NPU_BACKEND_ENV] = self._saved


def _patch_shape_handling():
    """``options={"enable_shape_handling": True}``: inputs padded or split to
    gear sizes (torch_npu/_inductor/shape_handling.py). The hook is installed
    here; npu's Inductor backend loads at the compiled function's first call
    (torch_npu/utils/_shape_handling_hook.py). Once torch_npu._inductor is
    loaded, its ``patch_shape_handling`` is looked up at each call, as real
    torch_npu's wrapper does; before, importing it would load the backend."""
    inductor_npu = sys.modules.get("torch_npu._inductor")
    if inductor_npu is not None:
        inductor_npu.patch_shape_handling()
        return
    from torch_npu.utils import _shape_handling_hook

    _shape_handling_hook.patch_dynamo_context()


@run_once
def _lazy_inductor_setup():
    """npu's part of Inductor (Note [Lazy Dynamo and Inductor setup])."""
    from torch_npu.utils._graph_tree import _apply_npugraph_tree_methods

    _this().register_inductor_npu()
    _apply_npugraph_tree_methods()


def patch_inductor_wrapper():
    """``torch.compile``'s Inductor wrapper for npu: the npu options, the
    Dynamo setup at torch.compile, the Inductor setup at the first compilation."""
    wrapper = torch._TorchCompileInductorWrapper
    if getattr(wrapper.__init__, "_npu", False):
        return
    init, apply_options, call = wrapper.__init__, wrapper.apply_options, wrapper.__call__

    def npu_apply_options(self, options):
        apply_options(self, options)
        if options and options.get("enable_shape_handling", False):
            if getattr(self, "_npu_in_init", False):
                self._npu_shape_handling = True  # after Dynamo's setup, below
            else:
                _this()._patch_shape_handling()

    def npu_init(self, mode, options, dynamic, *args, **kwargs):
        self._npu_in_init, self._npu_shape_handling = True, False
        try:
            init(self, mode, options, dynamic, *args, **kwargs)
            shape_handling = self._npu_shape_handling
        finally:
            del self._npu_in_init, self._npu_shape_handling
        _this()._lazy_dynamo_setup()
        if shape_handling:
            _this()._patch_shape_handling()
        backend = _resolve_npu_backend(self.config.get("npu_backend"))
        if backend != "default":
            with _this()._NpuBackendScope(backend):
                pass  # another backend is set up (or refused) at torch.compile already

    def npu_call(self, model_, inputs_):
        with _this()._NpuBackendScope(_resolve_npu_backend(self.config.get("npu_backend"))):
            return call(self, model_, inputs_)

    npu_init._npu = True
    wrapper.__init__, wrapper.apply_options, wrapper.__call__ = npu_init, npu_apply_options, npu_call


def _compile_npu_graphs_for_npu(compile_fx_module):
    """Wraps Inductor's compile_fx (Note [Lazy Dynamo and Inductor setup])."""
    original = compile_fx_module.compile_fx
    if getattr(original, "_npu", False):
        return

    @functools.wraps(original)
    def compile_fx(model_, example_inputs_, *args, **kwargs):
        if not any(isinstance(t, torch.Tensor) and t.device.type == "npu" for t in example_inputs_):
            return original(model_, example_inputs_, *args, **kwargs)
        _this()._lazy_inductor_setup()
        from torch_npu._inductor.retarget import compile_npu_graph
        return compile_npu_graph(original, compile_fx_module, model_, example_inputs_, *args, **kwargs)

    compile_fx._npu = True
    compile_fx_module.compile_fx = compile_fx


# --- at import torch_npu --------------------------------------------------

@run_once
def install_npugraph_mark_step_trigger():
    from torch_npu.npu._graph_tree_state import npugraph_mark_step_begin
    torch.compiler.npugraph_mark_step_begin = npugraph_mark_step_begin


def add_dynamo_methods():
    """What ``import torch_npu`` installs (Note [Lazy Dynamo and Inductor setup])."""
    from torch_npu.dynamo import _install_lazy_torchair

    patch_has_triton()
    _install_lazy_torchair()
    patch_inductor_wrapper()
    install_npugraph_mark_step_trigger()
    call_after_import("torch._inductor.config", _add_npu_inductor_config)
    call_after_import("torch._inductor.compile_fx", _compile_npu_graphs_for_npu)
    _install_dynamo_post_import_trigger()  # last: with Dynamo imported already, the setup runs now
