"""torch.npu.matmul and torch.npu.conv: switches real torch_npu exposes (torch.npu.config is
the module config.py).

allow_hf32: may matmul/conv use HF32 (a reduced-precision float32)? The
virtual NPU computes in float32 either way; the flag is kept likewise.
"""


class _BoolFlags:
    _defaults: dict = {}

    def __init__(self):
        object.__setattr__(self, "_values", dict(self._defaults))

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(f"unknown option {name!r}; known: {', '.join(values)}")

    def __setattr__(self, name, value):
        if name not in self._values:
            raise AttributeError(f"unknown option {name!r}; known: {', '.join(self._values)}")
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
        self._values[name] = value


class _Matmul(_BoolFlags):
    _defaults = {"allow_hf32": False}


class _Conv(_BoolFlags):
    _defaults = {"allow_hf32": True}  # torch_npu's default for convolutions


matmul = _Matmul()
conv = _Conv()
