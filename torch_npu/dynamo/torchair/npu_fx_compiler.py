"""torchair.get_npu_backend (real torchair's npu_fx_compiler module): a dynamo backend over Inductor for npu."""

import datetime
import itertools
import os

from torch_npu.dynamo.torchair.configs.compiler_config import CompilerConfig

_dump_counter = itertools.count()


def _dump_graph(gm, dump):
    kind = dump.type.value
    if kind == "pbtxt":
        raise ValueError("torchair: config.debug.graph_dump.type 'pbtxt' writes GE's protobuf graph, and vNPU "
                         "has no GE to make one; use 'txt' (the FX graph) or 'py' (its Python code)")
    folder = dump.path.value or "."
    os.makedirs(folder, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d%H%M%S%f")
    path = os.path.join(folder, f"dynamo_original_graph_{next(_dump_counter)}_{stamp}.{kind}")
    with open(path, "w") as f:
        f.write(gm.print_readable(print_output=False) if kind == "txt" else gm.code)
    return path


def _user_replacements(mode):
    """The pattern replacements of torchair.register_replacement (every
    mode) and torch.npu.npugraph_ex.register_replacement ("npugraph_ex"
    mode), applied as an Inductor post-grad pass."""
    from torch_npu.npu.npugraph_ex import _patterns
    return _patterns.applied(("torchair", "npugraph_ex") if mode == "npugraph_ex" else ("torchair",))


def get_npu_backend(*, compiler_config=None, custom_decompositions=None):
    """The dynamo backend: ``torch.compile(model, backend=get_npu_backend(compiler_config=...))``.
    ``custom_decompositions`` ({op overload: function}) are applied on top of
    Inductor's own decompositions when the graph is traced to ATen."""
    config = CompilerConfig() if compiler_config is None else compiler_config
    if not isinstance(config, CompilerConfig):
        raise TypeError(f"compiler_config should be a torchair.CompilerConfig, got {type(config).__name__}")
    if custom_decompositions is not None and not isinstance(custom_decompositions, dict):
        raise TypeError(f"custom_decompositions should be a dict, got {type(custom_decompositions).__name__}")
    mode = config.mode.value

    def backend(gm, example_inputs, **kwargs):
        if custom_decompositions:
            from torch._inductor.decomposition import select_decomp_table
            kwargs.setdefault("decompositions", {**select_decomp_table(), **custom_decompositions})
        if config.debug.graph_dump.enabled:
            _dump_graph(gm, config.debug.graph_dump)
        if config.debug.run_eagerly:
            return gm.forward
        from torch._inductor import compile_fx as inductor
        if mode in ("reduce-overhead", "npugraph_ex"):
            # The same compiled graphs, each replayed as an NPU graph.
            from torch_npu._inductor.npugraph_runner import npugraph_inner_compile
            kwargs.setdefault("inner_compile", npugraph_inner_compile(inductor.compile_fx_inner))
            # A hit in AOTAutograd's cache would skip the wrapping (FX graph
            # cache hits do not).
            import torch._functorch.config as functorch_config
            with functorch_config.patch(enable_autograd_cache=False), _user_replacements(mode):
                return inductor.compile_fx(gm, example_inputs, **kwargs)
        with _user_replacements(mode):
            return inductor.compile_fx(gm, example_inputs, **kwargs)

    return backend
