"""Run a function on a module of torch's as soon as it is imported.

torch_npu adapts a few of torch's lazily imported modules (Dynamo, Inductor's
compile_fx, FlexAttention's front end). Importing them at ``import torch_npu``
would cost start-up time for programs that never use them (issue 28's import
budget), so the adaptation waits for the program's own import: a meta path
finder runs it right after the module's code, before the importer sees it,
and then leaves ``sys.meta_path``.
"""

import importlib.abc
import importlib.machinery
import sys


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds module ``name`` as the path finder does and, once its code ran,
    calls ``callbacks`` with it (in the order they were added)."""

    def __init__(self, name):
        self.name = name
        self.callbacks = []

    def after_exec(self, module):
        for fn in self.callbacks:
            fn(module)

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_adapt(module):
            exec_module(module)
            # Only once the module's code succeeded: after a failed import
            # the next attempt still has to be adapted.
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            self.after_exec(module)

        spec.loader.exec_module = exec_then_adapt
        return spec


def call_after_import(name, fn):
    """Calls ``fn(module)`` for module ``name``: now if it is imported, else right after its import."""
    if name in sys.modules:
        fn(sys.modules[name])
        return
    finder = next((f for f in sys.meta_path if type(f) is _AfterImport and f.name == name), None)
    if finder is None:
        finder = _AfterImport(name)
        sys.meta_path.insert(0, finder)
    finder.callbacks.append(fn)
