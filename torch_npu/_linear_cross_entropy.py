"""``torch.nn.functional.linear_cross_entropy``'s automatic choices on npu.

Its chunked path (``options=LinearCrossEntropyOptions()``) resolves "auto"
per (device type, dtype): an accumulation policy and chunking from a table
measured on A100 and x86 CPUs, and float32 accumulation for float16 /
bfloat16 inputs on hardware with a mixed-precision matmul (CUDA SM 7.0 / 8.0
and up, CPU). Other devices fall back to accumulating in the input's dtype.
An Ascend chip's matmul accumulates half-precision products in float32, and
vNPU's kernels are the CPU's: npu takes the CPU's row of the table and
float32 accumulation, so its results equal cpu's instead of drifting by
bfloat16 roundings (real torch_npu's test_modules parity test on
LinearCrossEntropyLoss).
"""

import torch

_HALF = (torch.float16, torch.bfloat16)


def _teach_npu(options_module):
    defaults = options_module._AUTO_DEFAULTS
    for dtype in _HALF:
        if ("cpu", dtype) in defaults:
            defaults.setdefault(("npu", dtype), defaults[("cpu", dtype)])
    options = options_module.LinearCrossEntropyOptions
    resolve = options._resolve_auto_acc_dtype
    if getattr(resolve, "_npu_taught", False):
        return

    def resolve_auto_acc_dtype(dtype, device):
        if device is not None and torch.device(device).type == "npu" and dtype in _HALF:
            return torch.float32
        return resolve(dtype, device)

    resolve_auto_acc_dtype._npu_taught = True
    options._resolve_auto_acc_dtype = staticmethod(resolve_auto_acc_dtype)


def install():
    from torch_npu._after_import import call_after_import

    call_after_import("torch.nn.modules.linear_cross_entropy_options", _teach_npu)
