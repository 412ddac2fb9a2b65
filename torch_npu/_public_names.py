"""Which module vNPU's public names report as theirs (``__module__``).

torch's rule for a public API, which real torch_npu follows (its
test/npu/test_public_bindings.py checks every public torch_npu module): a
module with ``__all__`` lists its public functions and classes there, each
reporting (``__module__``) that module or a public submodule of it, and
nothing it does not list may claim it; a module without ``__all__`` holds no
public name that reports another module.

vNPU often defines a name in a private module (``torch_npu.utils._save_async``)
and re-exports it where real torch_npu's users import it from. The helpers
here, called by the public module after its imports, make such a name report
the public module. Pickling by reference keeps working, since the name is
importable from there under its ``__qualname__``; so does
``inspect.getsource``, since only functions are moved (a function's source is
found through its code object, a class's through its module's file).
"""

import inspect
import sys
import types


def _private(module_name):
    return any(part.startswith("_") for part in module_name.split("."))


def report_public_module(module_name, names=None):
    """Makes each function in ``names`` (default: the module's ``__all__``)
    that vNPU defines in a private module, or in a public module that
    ``module_name`` is a submodule of, report ``module_name``: the most
    specific public module that lists it. Other names are left alone."""
    module = sys.modules[module_name]
    for name in module.__all__ if names is None else names:
        obj = module.__dict__.get(name)
        if not isinstance(obj, types.FunctionType) or obj.__qualname__ != name:
            continue  # classes keep theirs (inspect.getsource); an alias would not unpickle
        current = obj.__module__ or ""
        if not current.startswith("torch_npu") or current == module_name:
            continue
        if _private(current) or module_name.startswith(current + "."):
            obj.__module__ = module_name


def defined_in(namespace):
    """``defined_here`` of the module whose globals are ``namespace``, for a
    module to name its own at its end: ``__all__ = defined_in(globals())``."""
    return [name for name, obj in namespace.items()
            if not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
            and obj.__module__ == namespace["__name__"]]


def defined_here(module):
    """The public names of the functions and classes ``module`` defines
    itself, in definition order: the ``__all__`` of a module whose public
    names are exactly those."""
    return [name for name, obj in vars(module).items()
            if not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
            and obj.__module__ == module.__name__]
