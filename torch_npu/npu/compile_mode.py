"""Eager mode and graph mode (seed 001): ``torch.npu.set_compile_mode(jit_compile=...)``
and ``torch.npu.jit_compile``.

Real torch_npu's flag chooses between online-compiled and prebuilt kernels;
seed 001 uses it to switch "Eager mode (each op runs at once, for debugging)"
and "Graph mode (the whole graph compiled and optimised, for deployment)".
On vNPU the flag means the latter:

- ``torch.npu.jit_compile(model_or_fn)`` opts a module (or a function) into
  graph mode: while ``jit_compile`` is on, calls run ``torch.compile`` d with
  the ``"npu"`` backend (torchair over Inductor, torch_npu/_inductor), while
  it is off they run eagerly. The module itself is returned (same
  parameters, same state_dict keys); only its ``forward`` switches.
- ``set_compile_mode(jit_compile=True/False)`` synchronizes the device, as
  torch_npu does, then switches every opted-in module at once (debug eagerly,
  deploy compiled, without touching the model code). ``torch.npu.jit_compile
  = True`` (the seed's spelling) does the same.
- The default is the chip's, as in torch_npu: on for Ascend910A and the
  310P, off for Ascend910B and later (``VNPU_CHIP``).

Eager modules that were not opted in always run eagerly.
"""

import functools

import torch

_jit_compile = None  # None until set: the chip's default


def is_jit_compile() -> bool:
    from torch_npu.npu.device import _device_is_pre_910b  # the chip's default: on for 910A/310P
    return _device_is_pre_910b() if _jit_compile is None else _jit_compile


def set_compile_mode(jit_compile=False):
    """Graph mode on (True) or off (False) for the modules opted in with
    ``torch.npu.jit_compile``; synchronizes the device first."""
    global _jit_compile
    if not isinstance(jit_compile, bool):
        raise TypeError(f"jit_compile must be a bool, but got {type(jit_compile).__name__}")
    from torch_npu.npu.device import is_initialized
    if is_initialized():
        torch.npu.synchronize()
    _jit_compile = jit_compile


def is_jit_compile_false() -> bool:
    return not is_jit_compile()


def jit_compile(model=None, *, dynamic=None, fullgraph=False):
    """Opts ``model`` (an ``nn.Module`` or a function) into graph mode; usable
    as a decorator, also as ``@torch.npu.jit_compile(fullgraph=True)``."""
    if model is None:
        return functools.partial(jit_compile, dynamic=dynamic, fullgraph=fullgraph)
    if isinstance(model, bool):
        raise TypeError("torch.npu.jit_compile(True) is not a mode switch: use torch.npu.set_compile_mode("
                        "jit_compile=True) or torch.npu.jit_compile = True")
    if not callable(model):
        raise TypeError(f"torch.npu.jit_compile expects an nn.Module or a function, got {type(model).__name__}")
    eager = model.forward if isinstance(model, torch.nn.Module) else model
    if getattr(eager, "_npu_graph_mode", False):
        return model  # opted in already
    compiled = torch.compile(eager, backend="npu", dynamic=dynamic, fullgraph=fullgraph)

    @functools.wraps(eager)
    def switched(*args, **kwargs):
        return (compiled if is_jit_compile() else eager)(*args, **kwargs)

    switched._npu_graph_mode = True
    switched._npu_compiled = compiled
    if isinstance(model, torch.nn.Module):
        model.forward = switched
        return model
    return switched
