"""``import torch_npu.contrib.transfer_to_npu``: run an unchanged CUDA script on npu.

On import, as real torch_npu's module does:

- every public ``torch.cuda`` name that ``torch.npu`` also has becomes the
  npu one (devices, streams, events, memory, RNG, ``torch.cuda.amp``);
- ``"cuda"`` (in strings, ``torch.device``, ints stay indices) becomes
  ``"npu"`` in the ``device=`` / ``device_type=`` / ``map_location=`` /
  ``device_id=`` arguments of the factory functions, ``torch.load``,
  ``torch.autocast`` / ``torch.amp.GradScaler``, ``Tensor.to/new_*/pin_memory``,
  ``Module.to/to_empty``, ``torch.Generator``, ``set_default_device``;
- ``Tensor.cuda`` / ``Module.cuda`` are ``.npu``, ``Tensor.is_cuda`` is ``is_npu``;
- ``init_process_group("nccl")`` (and ``new_group``) use ``"hccl"``,
  ``is_nccl_available`` answers for hccl; DDP ``device_ids`` need no change;
- ``ProfilerActivity.CUDA`` in ``torch.profiler.profile(activities=...)`` is
  the npu activity;
- ``torch.jit.script`` returns its argument with a RuntimeWarning (scripted
  CUDA code paths would not be rewritten).

``torch.backends.cudnn`` is left alone. The list of replacements is printed
once, as a warning, on rank 0.
"""

import functools
import os
import warnings

import torch
import torch.distributed as dist

import torch_npu  # noqa: F401

_NOTICE = ("torch_npu.contrib.transfer_to_npu: the script runs on npu. torch.cuda.* now refers to torch.npu.*; "
           "'cuda' device arguments (factories, Tensor.to/cuda, Module.to/cuda, torch.load map_location, "
           "autocast, GradScaler, device meshes) become 'npu'; init_process_group('nccl') uses 'hccl'; "
           "ProfilerActivity.CUDA is the NPU activity; torch.jit.script is disabled.")

_DEVICE_KWARGS = ("device", "device_type", "map_location", "device_id")

_FACTORIES = ("tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm",
              "arange", "range", "linspace", "logspace", "eye", "empty_strided", "zeros_like", "ones_like",
              "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "tril_indices", "triu_indices",
              "normal", "bartlett_window", "blackman_window", "hamming_window", "hann_window", "kaiser_window",
              "sparse_coo_tensor", "from_file", "scalar_tensor")

_TENSOR_METHODS = ("to", "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "pin_memory")

_done = False


def _to_npu(value):
    """`value` with a cuda device replaced by the npu one (other values unchanged)."""
    if isinstance(value, str):
        if value == "cuda" or value.startswith("cuda:"):
            return "npu" + value[4:]
        return value
    if isinstance(value, torch.device) and value.type == "cuda":
        return torch.device("npu", value.index) if value.index is not None else torch.device("npu")
    if isinstance(value, dict) and value:  # map_location={"cuda:0": "cuda:1"}
        return {_to_npu(k): _to_npu(v) for k, v in value.items()}
    return value


def _wrap_device_args(fn, positional=()):
    """fn with device-like keyword arguments (and the given positional slots) rewritten."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if positional and args:
            args = tuple(_to_npu(a) if i in positional else a for i, a in enumerate(args))
        for key in _DEVICE_KWARGS:
            if key in kwargs:
                kwargs[key] = _to_npu(kwargs[key])
        return fn(*args, **kwargs)
    wrapper._transfer_to_npu = True
    return wrapper


def _patch(owner, name, positional=()):
    fn = getattr(owner, name, None)
    if fn is None or getattr(fn, "_transfer_to_npu", False):
        return
    setattr(owner, name, _wrap_device_args(fn, positional))


def _patch_torch_cuda():
    for name in dir(torch.npu):
        if name.startswith("__") or not hasattr(torch.cuda, name):
            continue
        try:
            setattr(torch.cuda, name, getattr(torch.npu, name))
        except (AttributeError, TypeError):
            pass
    torch.cuda.amp = torch.npu.amp


def _patch_tensor_and_module():
    torch.Tensor.cuda = torch.Tensor.npu
    torch.Tensor.is_cuda = property(lambda self: self.is_npu)
    # Tensor.to("cuda") / pin_memory("cuda"): the positional device too
    # (slot 1: the wrappers are plain functions, so slot 0 is self).
    for name in _TENSOR_METHODS:
        _patch(torch.Tensor, name, positional=(1,))
    torch.nn.Module.cuda = torch.nn.Module.npu
    _patch(torch.nn.Module, "to", positional=(1,))
    _patch(torch.nn.Module, "to_empty")


def _patch_factories():
    for name in _FACTORIES:
        _patch(torch, name)
    _patch(torch, "load", positional=(1,))
    _patch(torch, "set_default_device", positional=(0,))
    autocast, grad_scaler, generator = torch.autocast, torch.amp.GradScaler, torch.Generator

    class Autocast(autocast):  # torch.autocast("cuda", ...)
        def __init__(self, device_type, *args, **kwargs):
            super().__init__(_to_npu(device_type), *args, **kwargs)

    class GradScaler(grad_scaler):  # torch.amp.GradScaler("cuda")
        def __init__(self, device="cuda", *args, **kwargs):
            super().__init__(_to_npu(device), *args, **kwargs)

    Autocast.__name__ = "autocast"
    torch.autocast = torch.amp.autocast = Autocast
    torch.amp.GradScaler = GradScaler

    class Generator(generator):  # torch.Generator("cuda")
        def __new__(cls, device="cpu"):
            return generator(_to_npu(device))

    torch.Generator = Generator


def _patch_distributed():
    if not dist.is_available():
        return

    def backend(value):
        return "hccl" if isinstance(value, str) and value.lower() == "nccl" else value

    for name in ("init_process_group", "new_group"):
        fn = getattr(dist, name)

        @functools.wraps(fn)
        def wrapper(*args, _fn=fn, _name=name, **kwargs):
            if args and _name == "init_process_group":
                args = (backend(args[0]),) + args[1:]
            if "backend" in kwargs:
                kwargs["backend"] = backend(kwargs["backend"])
            return _fn(*args, **kwargs)
        setattr(dist, name, wrapper)
    dist.is_nccl_available = lambda: "hccl" in dist.Backend.backend_list
    # Device meshes named "cuda" (init_device_mesh("cuda", ...), DeviceMesh("cuda", ...),
    # Megatron's DeviceMesh.from_group(group, "cuda") for FSDP2) are npu meshes.
    from torch.distributed import device_mesh
    mesh_init = device_mesh.init_device_mesh
    _patch(device_mesh, "init_device_mesh", positional=(0,))
    if getattr(dist, "init_device_mesh", None) is mesh_init:
        dist.init_device_mesh = device_mesh.init_device_mesh
    mesh = device_mesh.DeviceMesh
    _patch(mesh, "__init__", positional=(1,))
    from_group = mesh.from_group
    if not getattr(from_group, "_transfer_to_npu", False):
        mesh.from_group = staticmethod(_wrap_device_args(from_group, positional=(1,)))


def _patch_profiler():
    profile = torch.profiler.profile

    class profile_npu(profile):
        def __init__(self, *args, activities=None, **kwargs):
            if activities is not None:
                activities = [torch.profiler.ProfilerActivity.PrivateUse1
                              if a == torch.profiler.ProfilerActivity.CUDA else a for a in activities]
            super().__init__(*args, activities=activities, **kwargs)

    torch.profiler.profile = profile_npu


def _patch_jit():
    def script(obj=None, *args, **kwargs):
        warnings.warn("torch.jit.script is disabled by torch_npu.contrib.transfer_to_npu; the object runs "
                      "eagerly.", RuntimeWarning, stacklevel=2)
        return obj

    torch.jit.script = script


def _notice():
    rank = os.environ.get("RANK", "0")
    if rank == "0":
        warnings.warn(_NOTICE, stacklevel=3)


def apply():
    """Installs every replacement (once)."""
    global _done
    if _done:
        return
    _patch_torch_cuda()
    _patch_tensor_and_module()
    _patch_factories()
    _patch_distributed()
    _patch_profiler()
    _patch_jit()
    _done = True
    _notice()


apply()
