"""torchair.inference: ``cache_compile``, torchair's compile-once entry for a
model's methods (vllm-ascend and MindSpeed wrap ``forward``-like methods
with it).

Real torchair compiles the method once into a GE graph, serialises it under
``cache_dir`` and, in later processes, loads it instead of compiling again,
calling it without Dynamo's guards. On vNPU the method is compiled by
``torch.compile`` with torchair's backend (get_npu_backend, which is
Inductor), so the compiled code is cached on disk by Inductor's own caches
(TORCHINDUCTOR_CACHE_DIR) and reused by later processes; Dynamo's guards
stay, so a call that needs another graph gets one instead of wrong results.
``cache_dir`` is therefore not used (a warning says so), and
``readable_cache`` (which decodes torchair's serialised GE cache) has
nothing to read.
"""

import types
import warnings

import torch

__all__ = ["cache_compile", "readable_cache", "set_dim_gears"]


def cache_compile(func, *, config=None, backend=None, dynamic=True, cache_dir=None, global_rank=None, tp_rank=None,
                  pp_rank=None, custom_decompositions=None, ge_cache=False, **kwargs):
    """The method ``func`` of an nn.Module, compiled with torchair's backend at its first call."""
    from torch_npu.dynamo.torchair.npu_fx_compiler import get_npu_backend
    from torch_npu.dynamo.torchair.configs.compiler_config import CompilerConfig

    if not isinstance(func, types.MethodType):
        raise ValueError(f"Only method can be cached now, got {func}")
    if not isinstance(func.__self__, torch.nn.Module):
        raise ValueError(f"Only torch.nn.Module method can be cached now, got {func}")
    if config is not None and not isinstance(config, CompilerConfig):
        raise TypeError(f"config should be a torchair.CompilerConfig, got {type(config).__name__}")
    if custom_decompositions:
        raise NotImplementedError("torchair.inference.cache_compile: custom_decompositions is not supported on "
                                  "vNPU (they apply to GE's lowering, which vNPU does not have)")
    unknown = sorted(kwargs)
    if unknown:
        raise TypeError(f"cache_compile() got unexpected keyword arguments {unknown}")
    if cache_dir is not None:
        warnings.warn("torchair.inference.cache_compile: cache_dir is not used on vNPU; the compiled graphs are "
                      "cached by Inductor under TORCHINDUCTOR_CACHE_DIR and reused from there")
    if backend is None:
        backend = get_npu_backend(compiler_config=config)
    return torch.compile(func, backend=backend, dynamic=dynamic)


def readable_cache(cache_bin, print_output=True, file=None):
    raise NotImplementedError("torchair.inference.readable_cache decodes torchair's serialised GE graph cache; "
                              "vNPU compiles with Inductor and writes no such cache (see cache_compile)")


def set_dim_gears(t, dim_gears):
    raise NotImplementedError("torchair.inference.set_dim_gears selects GE's gear (bucketed dynamic shape) "
                              "graphs, which vNPU does not build; compiled graphs on vNPU follow Dynamo's "
                              "dynamic shapes (cache_compile(..., dynamic=True))")
