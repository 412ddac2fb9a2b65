"""torch.npu.config (``import torch_npu.npu.config`` works, as in torch_npu).

allow_internal_format: may ops keep results in private NPU layouts
(NC1HWC0, FRACTAL_NZ)? The virtual NPU always computes in ND layout; the flag
is kept so code that sets or reads it behaves the same. Setting anything else,
or a non-bool, raises.
"""

import sys
import types

_OPTIONS = {"allow_internal_format": False}


class _ConfigModule(types.ModuleType):
    def __setattr__(self, name, value):
        if name in _OPTIONS:
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
        elif not name.startswith("_"):
            raise AttributeError(f"unknown option {name!r}; known: {', '.join(_OPTIONS)}")
        super().__setattr__(name, value)

    def __getattr__(self, name):
        raise AttributeError(f"unknown option {name!r}; known: {', '.join(_OPTIONS)}")


allow_internal_format = _OPTIONS["allow_internal_format"]
sys.modules[__name__].__class__ = _ConfigModule
