"""``import torch_npu.contrib.transfer_to_npu``: run an unchanged CUDA script on npu.

On import, as real torch_npu's module does:

- every public ``torch.cuda`` name that ``torch.npu`` also has becomes the
  npu one (devices, streams, events, memory, RNG, ``torch.cuda.amp``), and
  every name of ``torch.npu.__all__`` is on ``torch.cuda`` as well, the
  npu-only ones included (``torch.cuda.NPUGraph``, ...);
- ``"cuda"`` (in strings, ``torch.device``, ints stay indices) becomes
  ``"npu"`` in the ``device=`` / ``device_type=`` / ``map_location=`` /
  ``device_id=`` arguments of the factory functions, ``torch.load``,
  ``torch.autocast`` / ``torch.amp.GradScaler``, ``Tensor.to/new_*/pin_memory``,
  ``Module.to/to_empty``, ``torch.Generator`` (``isinstance`` still true for
  every generator), ``set_default_device``, ``with torch.device("cuda"):``,
  and the device arguments of ``torch.cuda.*`` (``set_device``,
  ``current_stream``, memory statistics, ...);
- ``Tensor.cuda`` / ``Module.cuda`` are ``.npu``, ``Tensor.is_cuda`` is ``is_npu``;
- ``torch.cuda.get_device_capability`` is torch.npu's (TORCH_NPU_DEVICE_CAPABILITY)
  or, where that gives None, (8, 0): torch 2.13's own collectives index it for
  ``is_cuda`` tensors;
- ``init_process_group("nccl")`` (and ``new_group``) use ``"hccl"``,
  ``is_nccl_available`` answers for hccl, ``ProcessGroupNCCL`` is the hccl
  process group class; DDP ``device_ids`` need no change;
- ``torch.utils.cpp_extension.include_paths(device_type="cuda")`` gives the
  npu's paths, ``torch._C._host_emptyCache`` empties the pinned host cache;
- ``ProfilerActivity.CUDA`` in ``torch.profiler.profile(activities=...)`` is
  the npu activity;
- ``torch.jit.script`` returns its argument with a RuntimeWarning (scripted
  CUDA code paths would not be rewritten);
- the library functions listed in ``apis_config.json`` (transformers'
  ``is_torch_cuda_available``, peft's ``infer_device``, accelerate's
  ``get_max_memory``, ...) see CUDA's own ``torch.cuda.is_available()``
  (False without a GPU), so they take their npu or cpu paths instead of
  CUDA-only ones (bitsandbytes, flash-attn 2, TF32). They are wrapped when
  their module is imported, so importing this module imports none of them.

``torch.backends.cudnn`` is left alone. The list of replacements is printed
once, as a warning, on rank 0.
"""

import functools
import importlib
import importlib.abc
import importlib.metadata
import importlib.util
import json
import logging
import os
import sys
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
              "sparse_coo_tensor", "sparse_compressed_tensor", "sparse_csr_tensor", "sparse_csc_tensor",
              "sparse_bsr_tensor", "sparse_bsc_tensor", "from_file", "scalar_tensor")

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
        return _replace_cuda_to_npu_in_dict(value)
    return value


def _replace_cuda_to_npu_in_dict(device_dict):
    """A copy of `device_dict` with "cuda" replaced by "npu" in its string keys
    and values, and cuda torch.devices by npu ones (map_location={"cuda:0":
    "cuda:1"}, device maps)."""
    def converted(item):
        return item.replace("cuda", "npu") if isinstance(item, str) else _to_npu(item)
    return {converted(k): converted(v) for k, v in device_dict.items()}


def _device_ids_to_npu(device_ids):
    """DDP / FSDP `device_ids=["cuda:0", ...]` (a list or tuple) on npu; ints stay indices."""
    converted = [_to_npu(d) for d in device_ids]
    return tuple(converted) if isinstance(device_ids, tuple) else converted


def _wrap_device_args(fn, positional=()):
    """fn with device-like keyword arguments, `device_ids` (and the given
    positional slots) rewritten."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if positional and args:
            args = tuple(_to_npu(a) if i in positional else a for i, a in enumerate(args))
        for key in _DEVICE_KWARGS:
            if key in kwargs:
                kwargs[key] = _to_npu(kwargs[key])
        if isinstance(kwargs.get("device_ids"), (list, tuple)):
            kwargs["device_ids"] = _device_ids_to_npu(kwargs["device_ids"])
        return fn(*args, **kwargs)
    wrapper._transfer_to_npu = True
    return wrapper


def _wrapper_cuda(fn):
    """`fn` taking "cuda" for "npu" in its device keyword arguments and
    `device_ids` (real torch_npu's name for this decorator)."""
    return _wrap_device_args(fn)


def _patch(owner, name, positional=()):
    fn = getattr(owner, name, None)
    if fn is None or getattr(fn, "_transfer_to_npu", False):
        return
    setattr(owner, name, _wrap_device_args(fn, positional))


# What torch.cuda.get_device_capability answers when TORCH_NPU_DEVICE_CAPABILITY
# is unset: torch 2.13's own CUDA paths index it for tensors whose is_cuda is
# now True (torch.distributed.broadcast: `get_device_capability(t.device)[0]
# >= 9`), so real torch_npu's None would crash them. Ampere's (8, 0) says bf16
# and TF32 exist, as they do on the NPU, and claims no Hopper-only feature.
_CUDA_CAPABILITY_FALLBACK = (8, 0)


def _cuda_device_capability(device=None):
    """torch.npu.get_device_capability (TORCH_NPU_DEVICE_CAPABILITY), else (8, 0)."""
    capability = torch.npu.get_device_capability(device)
    return _CUDA_CAPABILITY_FALLBACK if capability is None else capability


def _patch_torch_cuda():
    for name in dir(torch.npu):
        if name.startswith("__") or not hasattr(torch.cuda, name):
            continue
        try:
            setattr(torch.cuda, name, getattr(torch.npu, name))
        except (AttributeError, TypeError):
            pass
    # As real torch_npu's patch does, every name of torch.npu.__all__ is on
    # torch.cuda too, the npu-only ones included (torch.cuda.SyncLaunchStream,
    # torch.cuda.NPUGraph, torch.cuda.set_compile_mode, ...).
    for name in torch.npu.__all__:
        if not hasattr(torch.cuda, name):
            setattr(torch.cuda, name, getattr(torch.npu, name))
    torch.cuda.amp = torch.npu.amp
    torch.cuda.get_device_capability = _cuda_device_capability
    # torch.npu's, looked up at each use: it fills in at the first device use.
    if "default_generators" in vars(torch.cuda):
        del torch.cuda.default_generators
    cuda_getattr = getattr(torch.cuda, "__getattr__", None)

    def cuda_module_getattr(name):
        if name == "default_generators":
            return torch.npu.default_generators
        if cuda_getattr is not None:
            return cuda_getattr(name)
        raise AttributeError(f"module 'torch.cuda' has no attribute '{name}'")

    torch.cuda.__getattr__ = cuda_module_getattr


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
    from torch.utils import _device
    constructors = set(_device._device_constructors())  # torch's own functions, before they are wrapped
    for name in _FACTORIES:
        _patch(torch, name)
    # `with torch.device(...)` injects its device into the calls it knows: the
    # wrappers too, so that the device reaches them (and is rewritten there).
    constructors |= {getattr(torch, name) for name in _FACTORIES if hasattr(torch, name)}
    _device._device_constructors = functools.cache(lambda: constructors)
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

    torch.Generator = _device_taking_type(generator, "cpu")  # torch.Generator("cuda")
    torch.Event = _device_taking_type(torch.Event, None)  # torch.Event("cuda:0", enable_timing=True)
    _patch(torch, "get_device_module", positional=(0,))
    for name in ("fftfreq", "rfftfreq"):
        _patch(torch.fft, name)
    # Profiler kernels recorded as 'cuda' (torch.autograd.profiler_util.Kernel(name, device, duration)).
    _patch(torch.autograd.profiler_util.Kernel, "__new__", positional=(2,))
    # `with torch.device("cuda"):` makes factories default to npu.
    _patch(_device.DeviceContext, "__init__", positional=(1,))


def _device_taking_type(base, default_device):
    """A stand-in for the torch type `base` whose constructor takes "cuda" for
    "npu". It makes `base`'s own objects, so isinstance / issubclass with the
    stand-in answer for every `base` object (samplers and RNG helpers ask)."""
    class StandInType(type(base)):
        def __instancecheck__(cls, instance):
            return isinstance(instance, base)

        def __subclasscheck__(cls, subclass):
            return issubclass(subclass, base)

    class StandIn(base, metaclass=StandInType):
        def __new__(cls, device=default_device, *args, **kwargs):
            return base(_to_npu(device), *args, **kwargs)

    StandIn.__name__ = StandIn.__qualname__ = base.__name__
    return StandIn


def _backend_to_hccl(value):
    """"nccl" -> "hccl"; in device:backend lists ("cpu:gloo,cuda:nccl") cuda too."""
    if not isinstance(value, str):
        return value
    parts = []
    for part in value.split(","):
        device, sep, name = part.rpartition(":")
        name = "hccl" if name.strip().lower() == "nccl" else name
        parts.append(f"{_to_npu(device.strip())}{sep}{name}" if sep else name)
    return ",".join(parts)


def _wrapper_hccl(fn):
    """`fn` (init_process_group, new_group, ...) taking "nccl" for "hccl" in a
    backend given first or as `backend=`, and a cuda `device_id` for the npu
    one (real torch_npu's name for this decorator)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if args and isinstance(args[0], str):  # new_group's first argument is its ranks
            args = (_backend_to_hccl(args[0]),) + tuple(args[1:])
        if "backend" in kwargs:
            kwargs["backend"] = _backend_to_hccl(kwargs["backend"])
        if "device_id" in kwargs:
            kwargs["device_id"] = _to_npu(kwargs["device_id"])
        return fn(*args, **kwargs)
    wrapper._transfer_to_npu = True
    return wrapper


def _del_nccl_device_backend_map():
    """Drops torch's default "cuda" -> "nccl" pairing, so that a process group
    made without a backend (init_process_group(), device meshes) does not look
    for NCCL; "npu" -> "hccl" stays."""
    backend_map = getattr(dist.Backend, "default_device_backend_map", None)
    if backend_map is not None and "cuda" in backend_map:
        del backend_map["cuda"]


def _patch_distributed():
    if not dist.is_available():
        return
    for name in ("init_process_group", "new_group"):
        fn = getattr(dist, name)
        if not getattr(fn, "_transfer_to_npu", False):
            setattr(dist, name, _wrapper_hccl(fn))
    _del_nccl_device_backend_map()
    dist.is_nccl_available = lambda: "hccl" in dist.Backend.backend_list
    # Code that builds NCCL's options or checks for its class gets hccl's.
    from torch_npu._C._distributed_c10d import ProcessGroupHCCL
    from torch.distributed import distributed_c10d
    dist.ProcessGroupNCCL = distributed_c10d.ProcessGroupNCCL = ProcessGroupHCCL
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


def _patch_extensions_and_host_memory():
    # torch.utils.cpp_extension.include_paths(device_type="cuda"): the npu's (torch's base paths; the
    # CUDA ones need CUDA_HOME, which a machine without CUDA lacks).
    from torch.utils import cpp_extension
    _patch(cpp_extension, "include_paths", positional=(0,))
    # torch.cuda.host_memory's empty cache reaches torch._C._host_emptyCache.
    torch._C._host_emptyCache = torch_npu._C._npu_hostEmptyCache


def _patch_profiler():
    profile = torch.profiler.profile

    class profile_npu(profile):
        def __init__(self, *args, activities=None, **kwargs):
            if activities is not None:
                activities = [torch.profiler.ProfilerActivity.PrivateUse1
                              if a == torch.profiler.ProfilerActivity.CUDA else a for a in activities]
            super().__init__(*args, activities=activities, **kwargs)

    torch.profiler.profile = profile_npu


# Library functions that must see CUDA's own answer to "is there a GPU?" while
# torch.cuda is torch.npu: they pick CUDA-only features (bitsandbytes,
# flash-attn 2, TF32) or enumerate CUDA devices, and on npu must take their
# non-CUDA path. Per package: the first version they apply to, and each API
# ("function" at module level or "method" of a class).
_LIBRARY_APIS_FILE = os.path.join(os.path.dirname(os.path.realpath(__file__)), "apis_config.json")
_MAX_CONFIG_BYTES = 10 * 1024 ** 2
_MAX_FILE_NAME = 200


def _check_input_file_valid(file_path):
    """Whether `file_path` is a readable regular file, not a link, with a
    name of at most 200 characters and at most 10 MiB."""
    if os.path.islink(os.path.abspath(file_path)):
        return False
    path = os.path.realpath(file_path)
    return (os.path.exists(path) and os.access(path, os.R_OK)
            and len(os.path.basename(path)) <= _MAX_FILE_NAME and os.path.getsize(path) <= _MAX_CONFIG_BYTES)


def _load_json_file(file_path):
    """The JSON object in `file_path`, or {} if the file is not valid
    (_check_input_file_valid), not JSON, or not an object."""
    if not _check_input_file_valid(file_path):
        return {}
    try:
        with open(file_path, "r") as file:
            content = json.load(file)
    except json.JSONDecodeError:
        return {}
    return content if isinstance(content, dict) else {}


_cuda_is_available = torch.cuda.is_available  # CUDA's own, before torch.cuda becomes torch.npu


def _wrapper_libraries_func(fn):
    """`fn` run with CUDA's own torch.cuda.is_available (False without a GPU)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        patched = torch.cuda.is_available
        torch.cuda.is_available = _cuda_is_available
        try:
            return fn(*args, **kwargs)
        finally:
            torch.cuda.is_available = patched
    return wrapper


def _version_at_least(version, minimum):
    from packaging.version import InvalidVersion, Version
    try:
        return Version(version) >= Version(minimum)
    except InvalidVersion:
        return False


def _wrap_api(module, full_name, kind):
    """Wraps one API of the imported `module` (its function, or its class's method)."""
    owner = getattr(module, full_name.split(".")[-2], None) if kind == "method" else module
    name = full_name.split(".")[-1]
    fn = getattr(owner, name, None) if owner is not None else None
    if fn is not None and not getattr(fn, "_transfer_to_npu", False):
        wrapped = _wrapper_libraries_func(fn)
        wrapped._transfer_to_npu = True
        setattr(owner, name, wrapped)


class _WrapOnImport(importlib.abc.MetaPathFinder):
    """Wraps the APIs of a module when it is first imported: importing every
    listed library up front would cost seconds and run their import-time
    side effects in scripts that never use them."""

    def __init__(self):
        self.pending = {}  # module name -> [(api, kind)]
        self._finding = set()

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.pending or fullname in self._finding:
            return None
        self._finding.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._finding.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        exec_module, apis = spec.loader.exec_module, self.pending.pop(fullname)

        def exec_and_wrap(module):
            exec_module(module)
            for full_name, kind in apis:
                _wrap_api(module, full_name, kind)
        spec.loader.exec_module = exec_and_wrap
        return spec


_on_import = _WrapOnImport()


def _do_wrapper_libraries_func(apis_by_package):
    """Wraps (_wrapper_libraries_func) each API of each installed package at
    or above its version in `apis_by_package` (apis_config.json's layout):
    now if its module is imported, else when it is."""
    for package, entry in apis_by_package.items():
        try:
            installed = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
        if not isinstance(entry, dict) or not _version_at_least(installed, str(entry.get("version", "0"))):
            continue
        for full_name, kind in (entry.get("apis") or {}).items():
            if kind not in ("function", "method"):
                continue
            module_name = ".".join(full_name.split(".")[:-2 if kind == "method" else -1])
            if module_name in sys.modules:
                _wrap_api(sys.modules[module_name], full_name, kind)
            else:
                _on_import.pending.setdefault(module_name, []).append((full_name, kind))
    if _on_import.pending and _on_import not in sys.meta_path:
        sys.meta_path.insert(0, _on_import)


def _wrapper_profiler(fn):
    """`fn` (a profiler constructor) without an `experimental_config` that is
    not torch_npu's (CUDA's options mean nothing on npu): dropped, with a warning.
    Real torch_npu's private decorator, kept for code that imports it; this
    module's own profiler patch maps the activities instead (_patch_profiler)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        config = kwargs.get("experimental_config")
        if "experimental_config" in kwargs and type(config) is not torch_npu.profiler._ExperimentalConfig:
            logging.warning("The experimental_config argument of torch.profiler.profile was dropped by "
                            "transfer_to_npu: it holds CUDA's options; pass a "
                            "torch_npu.profiler._ExperimentalConfig to set the NPU's.")
            del kwargs["experimental_config"]
        return fn(*args, **kwargs)
    return wrapper


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
    # The module, not torch.npu.device (the context manager class of the same name).
    importlib.import_module("torch_npu.npu.device")._cuda_is_npu = True  # torch.cuda.set_device("cuda:0"), ...
    _patch_torch_cuda()
    _patch_tensor_and_module()
    _patch_factories()
    _patch_distributed()
    _patch_extensions_and_host_memory()
    _patch_profiler()
    _patch_jit()
    _do_wrapper_libraries_func(_load_json_file(_LIBRARY_APIS_FILE))
    _done = True
    _notice()


apply()
