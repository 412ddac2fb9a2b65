"""torch_npu.dynamo: the dynamo backends of npu, and torchair.

``import torchair`` gives ``torch_npu.dynamo.torchair`` (the alias below), as
with real torch_npu, which ships torchair inside it. Dynamo backends:

- ``"npu"``: torchair's backend (``torchair.get_npu_backend()``), compiled
  by Inductor for npu underneath (torch_npu/_inductor);
- ``"npugraph_ex"``: torchair's mode of that name (Inductor's graphs, each
  replayed as an NPU graph, torch_npu/_inductor/npugraph_runner.py);
- ``"npugraphs"``: the eager FX graphs replayed as NPU graphs (torch's
  "cudagraphs" backend for npu).
"""

import importlib
import importlib.abc
import importlib.util
import sys


class _TorchairAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``torchair`` and ``torchair.*`` to the modules of
    ``torch_npu.dynamo.torchair``: one copy, whichever name imports it."""

    def find_spec(self, name, path=None, target=None):
        if name == "torchair" or name.startswith("torchair."):
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("torch_npu.dynamo." + spec.name)

    def exec_module(self, module):
        pass


def install_torchair_alias():
    if not any(isinstance(f, _TorchairAlias) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchairAlias())  # before PathFinder, so submodules resolve here too


# The dynamo backends, found through the "torch_dynamo_backends" entry points
# (pyproject.toml), so that nothing is imported before a compilation uses them.
def npu(gm, example_inputs, **kwargs):
    from torch_npu.dynamo.torchair import get_npu_backend
    return get_npu_backend()(gm, example_inputs, **kwargs)


# npugraph_ex's options vNPU knows (torch.compile(..., backend="npugraph_ex",
# options={...})). clone_input: copy the inputs before each replay; an NPU graph
# here always replays from its own copies of the inputs, so either value holds.
_NPUGRAPH_EX_OPTIONS = {"clone_input": bool}


def check_npugraph_ex_options(options):
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"npugraph_ex: options should be a dict, got {type(options).__name__}")
    for name, value in (options or {}).items():
        if name not in _NPUGRAPH_EX_OPTIONS:
            raise ValueError(f"npugraph_ex: unknown option {name!r}; vNPU supports "
                             f"{sorted(_NPUGRAPH_EX_OPTIONS)}")
        if not isinstance(value, _NPUGRAPH_EX_OPTIONS[name]):
            raise TypeError(f"npugraph_ex: option {name!r} should be a {_NPUGRAPH_EX_OPTIONS[name].__name__}, "
                            f"got {value!r}")


def npugraph_ex(gm, example_inputs, options=None, **kwargs):
    from torch_npu.dynamo.torchair import CompilerConfig, get_npu_backend
    check_npugraph_ex_options(options)
    config = CompilerConfig()
    config.mode = "npugraph_ex"
    return get_npu_backend(compiler_config=config)(gm, example_inputs, **kwargs)


def npugraph_mark_step_begin():
    """``torch.compiler.npugraph_mark_step_begin()``, real torch_npu's
    counterpart of ``torch.compiler.cudagraph_mark_step_begin()``: tells the
    NPU-graph backends that a new iteration begins, so that outputs of the
    previous one may be overwritten. vNPU's NPU-graph replays
    (torch_npu/_inductor/npugraph_runner.py) return fresh output tensors and
    never overwrite what an earlier call returned, so a step boundary frees
    nothing here: the call is accepted anywhere outside a compiled region,
    as CUDA's is, and programs that need it on the hardware keep it."""


def npugraphs(gm, example_inputs, **kwargs):
    """torch's "cudagraphs" backend for npu: the eager FX graphs of forward and
    backward (AOTAutograd), each replayed as an NPU graph, no Inductor."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch_npu._inductor.npugraph_runner import NpuGraphRunner

    def forward_compiler(fx, inputs):
        return NpuGraphRunner(make_boxed_func(fx), name="graph")

    def backward_compiler(fx, inputs):
        return NpuGraphRunner(make_boxed_func(fx), name="backward graph")

    return aot_autograd(fw_compiler=forward_compiler, bw_compiler=backward_compiler)(gm, example_inputs, **kwargs)
