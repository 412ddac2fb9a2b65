"""torchair's top-level functions besides the backend: ``get_compiler``,
``dynamo_export``, ``patch_for_hcom`` and ``register_replacement``."""

import logging

__all__ = ["get_compiler", "dynamo_export", "patch_for_hcom", "register_replacement"]

_logger = logging.getLogger("torchair")


def get_compiler(compiler_config=None):
    """torchair's compiler of ATen-level FX graphs, for custom backends built
    on AOTAutograd (``aot_module_simplified(gm, inputs, fw_compiler=get_compiler())``):
    Inductor's, replayed as an NPU graph in the "reduce-overhead" and
    "npugraph_ex" modes."""
    from torch_npu.dynamo.torchair.configs.compiler_config import CompilerConfig
    config = CompilerConfig() if compiler_config is None else compiler_config
    if not isinstance(config, CompilerConfig):
        raise TypeError(f"compiler_config should be a torchair.CompilerConfig, got {type(config).__name__}")

    def compiler(gm, example_inputs):
        from torch._inductor.compile_fx import compile_fx_inner
        if config.debug.run_eagerly.value:
            return gm.forward
        if config.mode.value in ("reduce-overhead", "npugraph_ex"):
            from torch_npu._inductor.npugraph_runner import npugraph_inner_compile
            return npugraph_inner_compile(compile_fx_inner)(gm, list(example_inputs))
        return compile_fx_inner(gm, list(example_inputs))
    return compiler


def dynamo_export(*args, model, export_path="export_graph", export_name="export", dynamic=False, config=None,
                  **kwargs):
    raise NotImplementedError("torchair.dynamo_export is not supported on vNPU: it writes the model as GE graph "
                              "files (.air) for the Ascend graph engine, which vNPU does not have; use "
                              "torch.export.export for a portable graph")


def patch_for_hcom():
    """Real torchair patches torch.distributed's collectives into GE converters
    for graphs of torch < 2.3.1, and for later torch says they are not needed:
    Dynamo traces the collectives itself, as it does on vNPU."""
    _logger.warning("For versions 2.3.1 and above of PyTorch, there is no need to call patch_for_hcom anymore.")


def register_replacement(search_fn, replace_fn, example_inputs, trace_fn=None, extra_check=None,
                         search_fn_pattern=None, scalar_workaround=None, skip_duplicates=False):
    """Registers ``search_fn -> replace_fn`` for every later compilation with
    torchair's backend (Inductor's pattern matcher, a post-grad pass)."""
    from torch_npu.npu.npugraph_ex import _patterns
    kwargs = {} if extra_check is None else {"extra_check": extra_check}
    return _patterns.register_for("torchair", search_fn, replace_fn, example_inputs, trace_fn=trace_fn,
                                  search_fn_pattern=search_fn_pattern, scalar_workaround=scalar_workaround,
                                  skip_duplicates=skip_duplicates, **kwargs)
