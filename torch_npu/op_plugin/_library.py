"""The ``torch.ops.npu`` library of fused operators, and how each is defined.

Real torch_npu implements these with Ascend kernels (Ascend/op-plugin). Here
each is a composition of ATen operators, registered as
CompositeImplicitAutograd: the same definition then serves every device
(libraries call some of them on CPU tensors), autograd differentiates through
the ATen operators, and FakeTensor / torch.compile trace them without a
separate meta kernel. On npu every ATen operator inside runs asynchronously on
the stream, so a fused op is a short chain of queued kernels; the costly ones
(attention) are built on ATen's fused CPU kernels, not on materialised
intermediates. See docs/fused_ops.md.
"""

import functools

import torch

from torch_npu import _C

# torch.ops.npu is created by the C++ adaptor (npu_format_cast); add to it.
_LIB = torch.library.Library("npu", "FRAGMENT")

# NNAL's ATB operators live in torch.ops.atb (op-plugin's atb_ops.yaml).
_ATB_LIB = torch.library.Library("atb", "DEF")

# Every operator (overload packet) defined here, in definition order: torch_npu
# re-exports them; torch.ops.npu.<packet> picks the overload from the arguments.
EXPORTED = []
# The same for torch.ops.atb: torch_npu re-exports these too (torch_npu._npu_paged_attention).
EXPORTED_ATB = []


def _with_capturable_host_constants(fn):
    """``fn`` with its host copies capturable in an NPU graph: on the device a
    fused op's host arguments (sequence lengths, index lists) are kernel
    arguments fixed at capture; the composition makes small device tensors
    of them (Note in csrc/core/npu_capture.h)."""
    set_capturable = _C._npu_set_host_constants_capturable

    @functools.wraps(fn)
    def impl(*args, **kwargs):
        previous = set_capturable(True)
        try:
            return fn(*args, **kwargs)
        finally:
            set_capturable(previous)
    return impl


def define(schema, fn, *, export=True):
    """Defines ``npu::<schema>`` with ``fn`` as its implementation on every device."""
    name = schema.split("(", 1)[0]  # "name" or "name.overload"
    _LIB.define(schema)
    _LIB.impl(name, _with_capturable_host_constants(fn), "CompositeImplicitAutograd")
    _C._note_op_route("npu::" + name, "python_composite")
    packet = name.split(".", 1)[0]
    if export and packet not in EXPORTED:
        EXPORTED.append(packet)
    return fn


def define_atb(schema, fn, *, export=True):
    """Defines ``atb::<schema>`` with ``fn`` as its implementation on every device."""
    name = schema.split("(", 1)[0]
    _ATB_LIB.define(schema)
    _ATB_LIB.impl(name, _with_capturable_host_constants(fn), "CompositeImplicitAutograd")
    _C._note_op_route("atb::" + name, "python_composite")
    packet = name.split(".", 1)[0]
    if export and packet not in EXPORTED_ATB:
        EXPORTED_ATB.append(packet)
    return fn


def check(cond, message):
    """Raises the RuntimeError torch_npu's argument checks raise."""
    if not cond:
        raise RuntimeError(message)
