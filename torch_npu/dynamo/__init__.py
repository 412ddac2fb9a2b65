"""torch_npu.dynamo: npu's compile backends, and the torchair and
npugraph_ex packages, imported only when a program uses them.

Three backends are known to Dynamo by name. pyproject.toml declares each as
an entry point of the ``torch_dynamo_backends`` group, so that
``torch.compiler.list_backends()`` names them before anything is compiled;
the Dynamo setup (torch_npu/utils/_dynamo.py) registers them again:

- ``"npu"``: torchair's backend (``torchair.get_npu_backend()``), which
  compiles with Inductor for npu (torch_npu/_inductor);
- ``"npugraph_ex"``: torchair in its mode of that name (each graph Inductor
  makes is replayed as an NPU graph), reached through ``npugraph_ex``;
- ``"npugraphs"``: the eager FX graph replayed as an NPU graph, i.e. torch's
  "cudagraphs" backend for npu (torch_npu/utils/_graph_tree.py).

Note [Lazy torchair and npugraph_ex]
Real torch_npu ships torchair and npugraph_ex inside this package and puts a
proxy under the top-level names (``sys.modules["torchair"]``,
``sys.modules["npugraph_ex"]``) at ``import torch_npu``, so that neither is
imported until a program asks for it. Asking means an ``import torchair``
statement (or ``from torchair.x import y``): the import system reads the
proxy's ``__spec__`` / ``__path__``, and only those two names load the
package. Every other read before then - ``hasattr``, a
``__warningregistry__`` sweep over ``sys.modules``, pytest scanning modules -
gets AttributeError and loads nothing. After the load, the proxy forwards
every attribute to the package and binds the package's loaded submodules on
both. A load that fails is remembered and raised again at every later use.

The implementation's modules are named ``torch_npu.dynamo.torchair.*``; the
public names ``torchair.*`` refer to the same module objects (the finder
below, plus aliases made at the load), never to a second copy.
"""

import importlib
import importlib.abc
import importlib.util
import sys

__all__ = []

_NPUGRAPH_EX = "npugraph_ex"


# ---------------------------------------------------------------------------
# The backends Dynamo knows by name
# ---------------------------------------------------------------------------

def _npu_backend_entrypoint(gm, example_inputs, **kwargs):
    """Entry point of "npu": set npu up in Dynamo, then compile with torchair."""
    _setup_dynamo()
    return _get_default_backend("npu")(gm, example_inputs, **kwargs)


def _npugraph_ex_backend_entrypoint(gm, example_inputs, **kwargs):
    """Entry point of "npugraph_ex"."""
    _setup_dynamo()
    return _compile_as_npugraph_ex(gm, example_inputs, **kwargs)


def _npugraphs_backend_entrypoint(gm, example_inputs, **kwargs):
    """Entry point of "npugraphs". Dynamo's generic keyword arguments
    (``options``) are accepted here and not passed on: the backend itself,
    ``NpugraphsBackend``, takes none and refuses them."""
    from torch_npu.utils._dynamo import _lazy_inductor_setup

    _setup_dynamo()
    _lazy_inductor_setup()
    from torch_npu.utils._graph_tree import NpugraphsBackend

    return NpugraphsBackend()(gm, example_inputs)


def _forget_recorded_npu_graphs():
    # torch.compiler.reset() calls this on each backend it used. Only what was
    # imported can hold graphs, so nothing is imported here.
    for module_name, reset_name in (("torch_npu.npu._graph_tree", "reset_npugraph_trees"),
                                    ("torch_npu._inductor.npugraph_runner", "reset_runners")):
        module = sys.modules.get(module_name)
        if module is not None:
            getattr(module, reset_name)()


_npugraphs_backend_entrypoint.reset = _forget_recorded_npu_graphs
_npugraphs_backend_entrypoint.compiler_name = "npugraphs"


def _setup_dynamo():
    from torch_npu.utils._dynamo import _lazy_dynamo_setup

    _lazy_dynamo_setup()


# torchair's backend per backend name, made at its first use.
_torchair_backends = {}


def _get_global_npu_backend(name, config=None):
    """torchair's backend for ``name``; npugraph_ex's is made anew each time,
    the others once."""
    cached = _torchair_backends.get(name)
    if cached is not None and name != _NPUGRAPH_EX:
        return cached
    if "torchair" not in sys.modules:
        from torch_npu.utils._error_code import ErrCode, pta_error
        raise AssertionError("Could not find module torchair. Please check if torchair is removed from "
                             "sys.modules." + pta_error(ErrCode.NOT_FOUND))
    import torchair

    backend = torchair.get_npu_backend(compiler_config=config)
    _torchair_backends[name] = backend
    return backend


def _get_default_backend(name):
    """The compiler function registered under ``name``: it asks for torchair's
    backend only when Dynamo first calls it, which is what keeps torchair
    unloaded until something is compiled."""
    _install_lazy_torchair()

    def compile_with_torchair(*args, **kwargs):
        return _get_global_npu_backend(name)(*args, **kwargs)

    return compile_with_torchair


def _compile_as_npugraph_ex(*args, **kwargs):
    import npugraph_ex

    config = npugraph_ex.CompilerConfig()
    config.mode = _NPUGRAPH_EX
    return npugraph_ex.get_npu_backend(compiler_config=config)(*args, **kwargs)


def _register_npu_backend(backend, name="npu"):
    """Registers ``backend`` with Dynamo under ``name``. Nothing is done when a
    backend of this module holds the name already, or when Dynamo is itself
    loading this module's entry point for it: importing the entry point
    imports torch_npu, whose setup comes here, and Dynamo registers what the
    load returns once it returns, so registering now would be a duplicate."""
    from torch._dynamo.backends.registry import _BACKENDS, _COMPILER_FNS, register_backend

    if name in _COMPILER_FNS:
        if getattr(_COMPILER_FNS[name], "__module__", None) == __name__:
            return
    elif getattr(_BACKENDS.get(name), "module", None) == __name__:
        return
    _BACKENDS.pop(name, None)
    register_backend(backend, name)


def _register_backends():
    """The Dynamo setup's step: "npu", then "npugraph_ex". Each registration
    leaves a done one alone, so retrying after a failure finishes the job."""
    _register_npu_backend(_get_default_backend(name="npu"))
    _register_npu_backend(_compile_as_npugraph_ex, _NPUGRAPH_EX)


# ---------------------------------------------------------------------------
# The lazy packages (Note [Lazy torchair and npugraph_ex])
# ---------------------------------------------------------------------------

def _implementation_name(public_name):
    """``torchair.x`` -> ``torch_npu.dynamo.torchair.x``."""
    return f"{__name__}.{public_name}"


def _explain_failed_load(error, pkg_name):
    """Adds to ``error`` that it comes from the deferred import of the package."""
    note = (f"\nThis error was raised while importing `{pkg_name}` (torch_npu.dynamo.{pkg_name}), "
            f"which is imported at its first use; see the error above.")
    if error.args:
        error.args = (f"{error.args[0]}{note}",) + tuple(error.args[1:])
    else:
        error.args = (note,)
    if isinstance(error, ImportError) and error.msg is not None:
        error.msg += note  # an ImportError prints its msg, not its args
    return error


def _loaded_children(*package_names):
    """(child name, module) for each loaded direct submodule of the packages."""
    for module_name, module in list(sys.modules.items()):
        if module is None:
            continue
        for package_name in package_names:
            child = module_name[len(package_name) + 1:]
            if module_name.startswith(package_name + ".") and "." not in child:
                yield child, module
                break


class _LazyPackage:
    """Stands in sys.modules for one package until an import statement loads it.

    Subclasses name, in ``_package_attr``, the attribute that holds the
    package once it is loaded (None before); ``_exception`` holds the error
    of a failed load (None otherwise)."""

    _package_attr = None
    # What the import system reads from a module in sys.modules.
    _names_that_load = frozenset(("__spec__", "__path__"))

    def __init__(self, pkg_name):
        self._pkg_name = pkg_name
        self._exception = None
        setattr(self, self._package_attr, None)

    def __getattr__(self, name):
        # Python calls this only for names the proxy itself lacks: the package's.
        own = self.__dict__
        if own.get("_exception") is not None:
            raise own["_exception"]
        package = own.get(self._package_attr)
        if package is None:
            self._refuse_before_load(name)
            package = self._load()
        if not hasattr(package, name):
            self._bind_children(package)  # a submodule imported since the load
        return getattr(package, name)

    def _refuse_before_load(self, name):
        if name in self._names_that_load:
            return
        from torch_npu.utils._error_code import ErrCode, pta_error
        pkg_name = self._pkg_name
        raise AttributeError(f"Try to get {pkg_name}'s attr `{name}` before {pkg_name} "
                             f"is initialized." + pta_error(ErrCode.INTERNAL))

    def _load(self):
        implementation = _implementation_name(self._pkg_name)
        try:
            package = importlib.import_module(implementation)
        except Exception as error:
            self._exception = _explain_failed_load(error, self._pkg_name)
            raise
        setattr(self, self._package_attr, package)
        # One module object per module: its public name is an alias.
        for module_name, module in list(sys.modules.items()):
            if module is not None and module_name.startswith(implementation + "."):
                sys.modules.setdefault(self._pkg_name + module_name[len(implementation):], module)
        self._bind_children(package)
        return package

    def _bind_children(self, package):
        """Makes each loaded submodule, under either name, an attribute of
        both the proxy and the package."""
        names = [self._pkg_name]
        real_name = getattr(package, "__name__", "")
        if real_name and real_name != self._pkg_name:
            names.append(real_name)
        for child, module in _loaded_children(*names):
            setattr(self, child, module)
            setattr(package, child, module)

    def __repr__(self):
        return f"<lazy package {self._pkg_name!r} (torch_npu.dynamo.{self._pkg_name})>"


class _LazyTorchair(_LazyPackage):
    _package_attr = "_torchair"


class _LazyNpuGraphEx(_LazyPackage):
    _package_attr = "_npugraph_ex"


_LAZY_PROXIES = {"torchair": _LazyTorchair, _NPUGRAPH_EX: _LazyNpuGraphEx}


class _PublicNameFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an import of ``torchair.x`` or ``npugraph_ex.x`` (or of the
    top-level name, should its proxy be gone) with the module object of
    ``torch_npu.dynamo.torchair.x`` / ``torch_npu.dynamo.npugraph_ex.x``."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".", 1)[0] not in _LAZY_PROXIES:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        module = importlib.import_module(_implementation_name(spec.name))
        # The import system sets module.__spec__ to this alias spec next;
        # exec_module puts the module's own back from here.
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module):
        own_spec = getattr(module.__spec__, "loader_state", None)
        if own_spec is not None:
            module.__spec__ = own_spec


def _install_lazy_torchair():
    """Puts the proxies under the public names (at ``import torch_npu``);
    what is there already is left."""
    if not any(isinstance(finder, _PublicNameFinder) for finder in sys.meta_path):
        # First on the path, so that submodules of the public names resolve here.
        sys.meta_path.insert(0, _PublicNameFinder())
    for pkg_name, proxy_type in _LAZY_PROXIES.items():
        if pkg_name not in sys.modules:
            sys.modules[pkg_name] = proxy_type(pkg_name)
    return True
