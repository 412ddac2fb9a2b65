"""torch's RNG-state operators for npu: ``run_and_save_rng_state`` and
``run_with_rng_state`` (torch._prims.rng_prims).

Compiled code that must replay random numbers (activation checkpointing with
``preserve_rng_state``, Inductor's ``fallback_random``) runs a random op
through ``run_and_save_rng_state`` in the forward, which also returns the
generator's state, and through ``run_with_rng_state`` in the recomputation,
which runs it again from that state. torch implements both per backend (CPU,
CUDA, XPU, HPU) and its backend selection refuses any other device ("Backend
not supported for npu"). npu's take and restore the npu generator's state,
as CUDA's do the CUDA generator's; the other devices keep torch's kernels.
"""

import torch
from torch._C import DispatchKey


def _npu_device_of(args, kwargs):
    """The npu device of the first tensor (or device) argument; None when it
    is another device's. (An npu graph Inductor compiles as a CPU graph traces
    these operators on CPU twins, so it is not served here yet.)"""
    for value in list(args) + list(kwargs.values()):
        device = value.device if isinstance(value, torch.Tensor) else value
        if isinstance(device, torch.device):
            return device if device.type == "npu" else None
    return None


def _run_and_save(op, *args, **kwargs):
    device = _npu_device_of(args, kwargs)
    return torch.npu.get_rng_state(device), op(*args, **kwargs)


def _run_with(rng_state, op, *args, **kwargs):
    device = _npu_device_of(args, kwargs)
    current = torch.npu.get_rng_state(device)
    torch.npu.set_rng_state(rng_state.cpu(), device)
    try:
        return op(*args, **kwargs)
    finally:
        torch.npu.set_rng_state(current, device)


def _on_npu(args, kwargs):
    return _npu_device_of(args, kwargs) is not None


def _route_backend_select(operator, npu_kernel, leading):
    """npu's kernel in front of ``operator``'s backend selection; ``leading``:
    the arguments before the op's own (the op, and the state for run_with)."""
    select = operator.py_kernels[DispatchKey.BackendSelect]
    if getattr(select, "_npu_routed", False):
        return

    def routed(*args, **kwargs):
        if _on_npu(args[leading:], kwargs):
            return npu_kernel(*args, **kwargs)
        return select(*args, **kwargs)

    routed._npu_routed = True
    operator.py_kernels[DispatchKey.BackendSelect] = routed
    operator._dispatch_cache.clear()


def _route_run_and_save_tracing(operator):
    """run_and_save_rng_state's FakeTensor and proxy kernels call torch's
    backend selection directly (not through the dispatcher): npu's kernel
    goes in front of both as well."""
    from torch._higher_order_ops import utils as hop_utils
    from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode, track_tensor_tree
    from torch.utils import _pytree as pytree

    fake = hop_utils.registered_hop_fake_fns.get(operator)
    if fake is not None and not getattr(fake, "_npu_routed", False):
        def fake_routed(op, *args, **kwargs):
            return _run_and_save(op, *args, **kwargs) if _on_npu(args, kwargs) else fake(op, *args, **kwargs)

        fake_routed._npu_routed = True
        hop_utils.registered_hop_fake_fns[operator] = fake_routed

    proxy = operator.python_key_table.get(ProxyTorchDispatchMode)
    if proxy is not None and not getattr(proxy, "_npu_routed", False):
        def proxy_routed(mode, op, *args, **kwargs):
            if not _on_npu(args, kwargs):
                return proxy(mode, op, *args, **kwargs)
            out = _run_and_save(op, *args, **kwargs)
            proxy_args = pytree.tree_map(mode.tracer.unwrap_proxy, (op, *args))
            proxy_kwargs = pytree.tree_map(mode.tracer.unwrap_proxy, kwargs)
            out_proxy = mode.tracer.create_proxy("call_function", operator, proxy_args, proxy_kwargs)
            return track_tensor_tree(out, out_proxy, constant=None, tracer=mode.tracer)

        proxy_routed._npu_routed = True
        operator.python_key_table[ProxyTorchDispatchMode] = proxy_routed
        operator._dispatch_cache.clear()


def _teach_npu(rng_prims):
    _route_backend_select(rng_prims.run_and_save_rng_state, _run_and_save, leading=1)
    _route_backend_select(rng_prims.run_with_rng_state, _run_with, leading=2)
    _route_run_and_save_tracing(rng_prims.run_and_save_rng_state)


def install():
    from torch_npu._after_import import call_after_import

    call_after_import("torch._prims.rng_prims", _teach_npu)
