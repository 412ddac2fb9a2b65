"""Shape handling's hook on torch.compile (``options={"enable_shape_handling": True}``).

A function compiled with shape handling runs through its gears: Dynamo's
optimize context (what torch.compile returns the function through) keeps the
Inductor options it was given, and the function it returns transforms each
call's arguments, calls the compiled function once per group and recovers
the result (torch_npu/_inductor/shape_handling.py). Modules and classes are
compiled as they are, as in real torch_npu.

The hook is installed when torch.compile is given the option, and npu's
Inductor backend (``torch_npu._inductor``, whose import loads it) is left
unloaded until the compiled function's first call, which builds the
NPUShapeHandling from the options: torch.compile itself loads no backend, as
real torch_npu's test_compile_trigger.py checks.
"""

import functools
import inspect

import torch

__all__ = []


def _enabled(compiler_config):
    return isinstance(compiler_config, dict) and bool(compiler_config.get("enable_shape_handling", False))


def patch_dynamo_context():
    """Installs the hook on Dynamo's optimize context (once)."""
    from torch._dynamo.eval_frame import _TorchDynamoContext

    if getattr(_TorchDynamoContext.__call__, "_npu_shape_handling", False):
        return
    original_init, original_call = _TorchDynamoContext.__init__, _TorchDynamoContext.__call__

    def init(self, callback, *args, **kwargs):
        original_init(self, callback, *args, **kwargs)
        config = kwargs.get("compiler_config")
        self._npu_shape_handling_config = config if _enabled(config) else None

    def call(self, fn):
        compiled = original_call(self, fn)
        config = getattr(self, "_npu_shape_handling_config", None)
        if config is None or isinstance(fn, torch.nn.Module) or inspect.isclass(fn):
            return compiled
        handling = []

        @functools.wraps(compiled)
        def through_gears(*args, **kwargs):
            from torch_npu._inductor import shape_handling

            if not handling:
                handling.append(shape_handling._handling_for(config))
            return shape_handling.call_through_gears(handling[0], compiled, args, kwargs)
        return through_gears

    call._npu_shape_handling = True
    _TorchDynamoContext.__init__, _TorchDynamoContext.__call__ = init, call
