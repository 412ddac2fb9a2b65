"""FlexAttention (``torch.nn.attention.flex_attention``) on npu, as torch_npu enables it.

torch's front end accepts only the devices it has kernels for ("FlexAttention is
only supported on CUDA, CPU, HPU, or MPS devices"), and its higher-order
operators have autocast rules for CPU and CUDA only. The operators themselves are
device-generic: eagerly they run the dense reference (scores materialised, the
same code CPU runs) and their backward runs on any device, so on npu they only
need to be let through and given an autocast rule:

- ``_validate_device`` accepts npu tensors (after the program imports the front
  end: importing it at ``import torch_npu`` would cost start-up time);
- the ``flex_attention`` and ``flex_attention_backward`` operators get
  AutocastPrivateUse1 kernels: under ``torch.autocast("npu")`` the forward casts
  query, key and value to the autocast dtype, as torch does on CUDA; the
  backward runs as recorded (autograd runs it outside autocast).
"""

import torch
from torch._C import DispatchKey

from torch_npu._after_import import call_after_import

_AUTOCAST_NPU = torch._C.DispatchKeySet(DispatchKey.AutocastPrivateUse1)


def _allow_npu(front_end):
    torch_check = front_end._validate_device
    if getattr(torch_check, "_npu_allowed", False):
        return

    def validate_device(query, key, value):
        if query.device.type == "npu":
            return  # devices already checked equal by _validate_sdpa_input
        torch_check(query, key, value)

    validate_device._npu_allowed = True
    front_end._validate_device = validate_device

    torch_options = front_end._apply_kernel_options

    def apply_kernel_options(query, key, value, return_lse, kernel_options, *args, **kwargs):
        options = torch_options(query, key, value, return_lse, kernel_options, *args, **kwargs)
        wants_lse = return_lse or getattr(kwargs.get("return_aux", args[0] if args else None), "lse", False)
        needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
        if query.device.type == "npu" and not wants_lse and not needs_grad:
            # Compiled, npu graphs run on Inductor's CPU template (docs/graph_mode.md),
            # which computes no logsumexp: ask for none when nothing needs it, as
            # torch does on CPU. (Eager runs compute it regardless.)
            options["OUTPUT_LOGSUMEXP"] = False
        return options

    front_end._apply_kernel_options = apply_kernel_options


def _forward_under_autocast(query, key, value, score_mod, block_mask, scale, kernel_options,
                            score_mod_other_buffers=(), mask_mod_other_buffers=()):
    from torch._higher_order_ops.flex_attention import flex_attention
    from torch.amp.autocast_mode import _cast

    dtype = torch.get_autocast_dtype("npu")
    query, key, value = (_cast(t, "npu", dtype) for t in (query, key, value))
    with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_NPU):
        return flex_attention(query, key, value, score_mod, block_mask, scale, kernel_options,
                              score_mod_other_buffers, mask_mod_other_buffers)


def _backward_under_autocast(*args):
    from torch._higher_order_ops.flex_attention import flex_attention_backward

    with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_NPU):
        return flex_attention_backward(*args)


def _register_autocast(module):
    for op, kernel in ((module.flex_attention, _forward_under_autocast),
                       (module.flex_attention_backward, _backward_under_autocast)):
        if not op.has_kernel_for_dispatch_key(DispatchKey.AutocastPrivateUse1):
            op.py_impl(DispatchKey.AutocastPrivateUse1)(kernel)


def install():
    call_after_import("torch.nn.attention.flex_attention", _allow_npu)
    call_after_import("torch._higher_order_ops.flex_attention", _register_autocast)
