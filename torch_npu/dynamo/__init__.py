"""torch_npu.dynamo: the compile backends of npu, and the lazy torchair and
npugraph_ex packages.

Backends (entry points of the ``torch_dynamo_backends`` group, pyproject.toml,
so that ``torch.compiler.list_backends()`` names them before anything is
compiled, and registered again by the Dynamo setup, torch_npu/utils/_dynamo.py):

- ``"npu"``: torchair's backend (``torchair.get_npu_backend()``), compiled
  by Inductor for npu underneath (torch_npu/_inductor);
- ``"npugraph_ex"``: torchair's mode of that name (Inductor's graphs, each
  replayed as an NPU graph), through the ``npugraph_ex`` package;
- ``"npugraphs"``: the eager FX graphs replayed as NPU graphs (torch's
  "cudagraphs" backend for npu, torch_npu/utils/_graph_tree.py).

Note [Lazy torchair and npugraph_ex]
Real torch_npu ships torchair and npugraph_ex inside this package and puts a
proxy under the top-level names (``sys.modules["torchair"]``,
``sys.modules["npugraph_ex"]``) at ``import torch_npu``, so that neither is
imported until a program asks for it. A proxy answers only ``__spec__`` and
``__path__`` before that: those are what an ``import torchair`` statement
(and ``from torchair.x import y``) reads, so such a statement loads the real
package; any other attribute read before then (``hasattr``, a
``__warningregistry__`` sweep over ``sys.modules``, pytest's module scans)
raises AttributeError and loads nothing. Once loaded, the proxy hands every
attribute on to the package and binds its loaded submodules on both.
A failed load is kept and raised again at each later use.

vNPU's torchair modules are named ``torch_npu.dynamo.torchair.*``; the
public names ``torchair.*`` are the same module objects (``_PublicNameAlias``
on sys.meta_path, and aliases made when the package is loaded), never a
second copy.
"""

import importlib
import importlib.abc
import importlib.util
import sys

__all__ = []

NPUGRAPH_EX_BACKEND = "npugraph_ex"
_LAZY_PACKAGES = ("torchair", NPUGRAPH_EX_BACKEND)

_global_npu_backend = {}
_global_backend_name = None


class _LazyException:
    """A failed load of a lazy package, raised again at each later use."""

    def __init__(self, error, pkg_name):
        note = (f"\nThis error was raised while importing `{pkg_name}` (torch_npu.dynamo.{pkg_name}), "
                f"which is imported at its first use; see the error above.")
        error.args = (f"{error.args[0]}{note}", *error.args[1:]) if error.args else (note,)
        if isinstance(error, ImportError) and error.msg is not None:
            error.msg += note  # what an ImportError prints
        self._error = error

    def __getattr__(self, name):
        raise self._error

    def __call__(self, *args, **kwargs):
        raise self._error


def _alias_public_names(package, pkg_name):
    """``torchair.x`` in sys.modules for each loaded ``torch_npu.dynamo.torchair.x``."""
    prefix = package.__name__ + "."
    for name, module in list(sys.modules.items()):
        if module is not None and name.startswith(prefix):
            sys.modules.setdefault(pkg_name + name[len(package.__name__):], module)


def _bind_lazy_submodules(proxy, package, pkg_name):
    """Binds each loaded direct child module of the package (under either
    name) as an attribute of both the proxy and the package."""
    prefixes = {pkg_name + "."}
    if getattr(package, "__name__", "") not in ("", pkg_name):
        prefixes.add(package.__name__ + ".")
    for name, module in list(sys.modules.items()):
        if module is None:
            continue
        prefix = next((p for p in prefixes if name.startswith(p)), None)
        if prefix is not None and "." not in name[len(prefix):]:
            setattr(proxy, name[len(prefix):], module)
            setattr(package, name[len(prefix):], module)


class _LazyBackend:
    """The proxy of one lazy package (Note [Lazy torchair and npugraph_ex]).
    Subclasses name the slot that holds the loaded package."""

    _slot = None
    _allowed_list = ("__spec__", "__path__")

    def __init__(self, pkg_name):
        self._pkg_name = pkg_name
        self._exception = None
        setattr(self, self._slot, None)

    def _load(self):
        try:
            package = importlib.import_module(f"{__name__}.{self._pkg_name}")
        except Exception as error:
            self._exception = _LazyException(error, self._pkg_name)
            raise
        setattr(self, self._slot, package)
        _alias_public_names(package, self._pkg_name)
        _bind_lazy_submodules(self, package, self._pkg_name)
        return package

    def __getattr__(self, name):
        # Only reached for what the instance itself lacks: the package's names.
        if self.__dict__.get("_exception") is not None:
            return self._exception()
        package = self.__dict__.get(self._slot)
        if package is None:
            if name not in self._allowed_list:
                from torch_npu.utils._error_code import ErrCode, pta_error
                raise AttributeError(f"Try to get {self._pkg_name}'s attr `{name}` before {self._pkg_name} "
                                     f"is initialized." + pta_error(ErrCode.INTERNAL))
            package = self._load()
        try:
            return getattr(package, name)
        except AttributeError:
            _bind_lazy_submodules(self, package, self._pkg_name)  # a child loaded since
            return getattr(package, name)

    def __repr__(self):
        return f"<lazy package {self._pkg_name!r} (torch_npu.dynamo.{self._pkg_name})>"


class _LazyTorchair(_LazyBackend):
    _slot = "_torchair"


class _LazyNpuGraphEx(_LazyBackend):
    _slot = "_npugraph_ex"


class _PublicNameAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``torchair.x`` and ``npugraph_ex.x`` to the module objects of
    ``torch_npu.dynamo.torchair.x`` and ``torch_npu.dynamo.npugraph_ex.x``
    (and the top-level names, should their proxies be removed)."""

    def __init__(self):
        self._own_specs = {}

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _LAZY_PACKAGES:
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        module = importlib.import_module(f"{__name__}.{spec.name}")
        # The import system writes the alias's spec over the module's own.
        self._own_specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = self._own_specs.pop(module.__name__, module.__spec__)


def _install_lazy_torchair():
    """Puts the proxies under the public names, once (at ``import torch_npu``)."""
    if not any(isinstance(f, _PublicNameAlias) for f in sys.meta_path):
        sys.meta_path.insert(0, _PublicNameAlias())  # before the path finder, so submodules resolve here
    if "torchair" not in sys.modules:
        sys.modules["torchair"] = _LazyTorchair("torchair")
    if NPUGRAPH_EX_BACKEND not in sys.modules:
        sys.modules[NPUGRAPH_EX_BACKEND] = _LazyNpuGraphEx(NPUGRAPH_EX_BACKEND)
    return True


def _get_global_npu_backend(name, config=None):
    """torchair's backend for ``name`` (made once, except npugraph_ex's)."""
    if name != NPUGRAPH_EX_BACKEND and name in _global_npu_backend:
        return _global_npu_backend[name]
    if "torchair" not in sys.modules:
        from torch_npu.utils._error_code import ErrCode, pta_error
        raise AssertionError("Could not find module torchair. Please check if torchair is removed from "
                             "sys.modules." + pta_error(ErrCode.NOT_FOUND))
    import torchair
    _global_npu_backend[name] = torchair.get_npu_backend(compiler_config=config)
    return _global_npu_backend[name]


def _lazy_exec(*args, **kwargs):
    return _get_global_npu_backend(_global_backend_name)(*args, **kwargs)


def _get_default_backend(name):
    global _global_backend_name
    _install_lazy_torchair()
    _global_backend_name = name
    return _lazy_exec


def _exec(*args, **kwargs):
    import npugraph_ex
    config = npugraph_ex.CompilerConfig()
    config.mode = NPUGRAPH_EX_BACKEND
    return npugraph_ex.get_npu_backend(compiler_config=config)(*args, **kwargs)


def _get_npugraph_ex_backend():
    _install_lazy_torchair()
    return _exec


def _register_npu_backend(backend, name="npu"):
    """Registers ``backend`` under ``name`` with Dynamo, unless this module's
    backend is registered already or is being registered by Dynamo itself."""
    from torch._dynamo.backends.registry import _BACKENDS, _COMPILER_FNS, register_backend

    registered = _COMPILER_FNS.get(name)
    if registered is not None and getattr(registered, "__module__", None) == __name__:
        return
    # Dynamo loading our entry point (which imports torch_npu, whose setup
    # lands here) registers the loaded function itself once the load
    # returns; registering now would make that a duplicate.
    pending = _BACKENDS.get(name)
    if name not in _COMPILER_FNS and getattr(pending, "module", None) == __name__:
        return
    _BACKENDS.pop(name, None)
    register_backend(backend, name)


def _register_backends():
    """The Dynamo setup's backends, "npu" then "npugraph_ex": each step
    skips what is registered already, so a retry after a failure completes it."""
    _register_npu_backend(_get_default_backend(name="npu"))
    _register_npu_backend(_get_npugraph_ex_backend(), NPUGRAPH_EX_BACKEND)


def _npu_backend_entrypoint(gm, example_inputs, **kwargs):
    """The "npu" entry point: Dynamo's setup for npu first, then torchair's backend."""
    from torch_npu.utils._dynamo import _lazy_dynamo_setup

    _lazy_dynamo_setup()
    return _get_default_backend("npu")(gm, example_inputs, **kwargs)


def _npugraph_ex_backend_entrypoint(gm, example_inputs, **kwargs):
    """The "npugraph_ex" entry point."""
    from torch_npu.utils._dynamo import _lazy_dynamo_setup

    _lazy_dynamo_setup()
    return _exec(gm, example_inputs, **kwargs)


class _NpugraphsBackendEntryPoint:
    """The "npugraphs" entry point: a callable that also carries the backend's
    ``reset`` (``torch.compiler.reset()`` calls it on every backend it used).
    Options are not the baseline backend's: they are dropped here, and
    ``NpugraphsBackend`` itself refuses them."""

    compiler_name = "npugraphs"

    def __call__(self, gm, example_inputs, **kwargs):
        from torch_npu.utils._dynamo import _lazy_dynamo_setup, _lazy_inductor_setup

        _lazy_dynamo_setup()
        _lazy_inductor_setup()
        from torch_npu.utils._graph_tree import NpugraphsBackend

        return NpugraphsBackend()(gm, example_inputs)

    @staticmethod
    def reset():
        # Only graph trees and runners that exist are reset: this must not import them.
        graph_tree = sys.modules.get("torch_npu.npu._graph_tree")
        if graph_tree is not None:
            graph_tree.reset_npugraph_trees()
        runners = sys.modules.get("torch_npu._inductor.npugraph_runner")
        if runners is not None:
            runners.reset_runners()


_npugraphs_backend_entrypoint = _NpugraphsBackendEntryPoint()

