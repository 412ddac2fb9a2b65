"""torch.npu.matmul and torch.npu.conv: switches real torch_npu exposes (torch.npu.config is
the module config.py), and torch.npu.CubeMathType.

allow_hf32: may matmul/conv use HF32 (a reduced-precision float32)?
matmul.cube_math_type: the precision the cube unit computes float32 matmuls
in (a CubeMathType; None until set). The virtual NPU computes in float32
either way; the settings are kept and read back likewise.
"""

import enum


class CubeMathType(enum.IntEnum):
    """The cube unit's precision choices for float32 matmuls (torch_npu's values)."""
    KEEP_DTYPE = 0
    ALLOW_FP32_DOWN_PRECISION = 1
    USE_FP16 = 2
    USE_HF32 = 3
    USE_FP32_ADD = 4
    FORCE_GRP_ACC_FOR_FP32 = 4  # the older name of USE_FP32_ADD (an alias, as in torch_npu)


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

    def __init__(self):
        super().__init__()
        object.__setattr__(self, "cube_math_type", None)

    def __setattr__(self, name, value):
        if name == "cube_math_type":
            if not isinstance(value, CubeMathType):
                raise TypeError("value should be one of Enum CubeMathType when setting cube_math_type, but got "
                                f"{type(value)}")
            object.__setattr__(self, name, value)
            return
        super().__setattr__(name, value)


class _Conv(_BoolFlags):
    _defaults = {"allow_hf32": True}  # torch_npu's default for convolutions


matmul = _Matmul()
conv = _Conv()
