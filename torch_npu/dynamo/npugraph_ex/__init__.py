"""npugraph_ex: the package behind the "npugraph_ex" compile backend
(``import npugraph_ex``, a lazy name until first use: Note [Lazy torchair and
npugraph_ex] in torch_npu/dynamo/__init__.py). Real torch_npu ships it beside
torchair; ``torch.npu.npugraph_ex`` (torch_npu/npu/npugraph_ex) is its user
API and calls into it.

On vNPU it is torchair's compiler in its "npugraph_ex" mode: Inductor's
graphs, each replayed as an NPU graph (torch_npu/_inductor/npugraph_runner.py).
"""

from torch_npu.dynamo.torchair.configs.compiler_config import CompilerConfig

__all__ = ["CompilerConfig", "get_npu_backend", "compile_fx"]

# The options vNPU knows (torch.compile(..., backend="npugraph_ex",
# options={...})). clone_input: copy the inputs before each replay; an NPU
# graph here always replays from its own copies of the inputs, so either
# value holds.
_OPTIONS = {"clone_input": bool}


def _check_options(options):
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"npugraph_ex: options should be a dict, got {type(options).__name__}")
    for name, value in (options or {}).items():
        if name not in _OPTIONS:
            raise ValueError(f"npugraph_ex: unknown option {name!r}; vNPU supports {sorted(_OPTIONS)}")
        if not isinstance(value, _OPTIONS[name]):
            raise TypeError(f"npugraph_ex: option {name!r} should be a {_OPTIONS[name].__name__}, got {value!r}")


def get_npu_backend(*, compiler_config=None, custom_decompositions=None):
    """torchair's backend for ``compiler_config`` (npugraph_ex's mode unless
    it names another), taking the ``options`` of ``torch.compile``."""
    from torch_npu.dynamo.torchair import get_npu_backend as torchair_backend

    if compiler_config is None:
        compiler_config = CompilerConfig()
        compiler_config.mode = "npugraph_ex"
    backend = torchair_backend(compiler_config=compiler_config, custom_decompositions=custom_decompositions)

    def npugraph_ex_backend(gm, example_inputs, options=None, **kwargs):
        _check_options(options)
        return backend(gm, example_inputs, **kwargs)

    return npugraph_ex_backend


def compile_fx(gm, example_inputs=None, options=None):
    """Compiles an ATen-level FX graph (AOTAutograd's forward or backward) with
    Inductor and replays it as an NPU graph from the second call on."""
    from torch._inductor.compile_fx import compile_fx_inner

    from torch_npu._inductor.npugraph_runner import npugraph_inner_compile
    from torch_npu.npu.npugraph_ex import _patterns

    _check_options(options)
    if example_inputs is None:
        raise ValueError("npugraph_ex.compile_fx: example_inputs are needed to compile the graph")
    with _patterns.applied(("npugraph_ex",)):
        return npugraph_inner_compile(compile_fx_inner)(gm, list(example_inputs))
