"""torch.npu.npugraph_ex.inference: ``cache_compile`` with the "npugraph_ex"
mode (torchair.inference.cache_compile's, torch_npu/dynamo/torchair/inference.py)."""

__all__ = ["cache_compile", "readable_cache"]


def cache_compile(func, *, dynamic=True, cache_dir=None, global_rank=None, tp_rank=None, pp_rank=None, **kwargs):
    from torch_npu.dynamo.torchair import CompilerConfig
    from torch_npu.dynamo.torchair import inference

    config = CompilerConfig()
    config.mode = "npugraph_ex"
    return inference.cache_compile(func, config=config, dynamic=dynamic, cache_dir=cache_dir,
                                   global_rank=global_rank, tp_rank=tp_rank, pp_rank=pp_rank, **kwargs)


def readable_cache(cache_bin, print_output=True, file=None):
    from torch_npu.dynamo.torchair import inference
    return inference.readable_cache(cache_bin, print_output=print_output, file=file)
