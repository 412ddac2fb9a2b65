"""Names real torch_npu binds in C++ on ``torch_npu._C`` that vNPU writes in
Python: ``torch_npu._C.<name>`` imports the module that defines it at first
use (``_C.__getattr__``), so ``import torch_npu`` pays nothing for them."""

import importlib

# name on _C -> the module whose C_NAMES holds it
_MODULES = {name: "torch_npu._inductor._shape_gears"
            for name in ("ShapeType", "ShapePolicy", "_NPUShapeHandling", "_BSShapeOpStrategy", "_SeqShapeOpStrategy")}


def c_getattr(name):
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'torch_npu._C' has no attribute '{name}'")
    return importlib.import_module(module).C_NAMES[name]
