"""torch_npu.dynamo: the dynamo backends of npu, and torchair.

``import torchair`` gives ``torch_npu.dynamo.torchair`` (the alias below), as
with real torch_npu, which ships torchair inside it. Dynamo backends:

- ``"npu"``: torchair's backend (``torchair.get_npu_backend()``), compiled
  by Inductor for npu underneath (torch_npu/_inductor);
- ``"npugraph_ex"`` / ``"npugraphs"``: NPU-graph replay, not supported yet
  (they raise, naming what to use instead).
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


def npugraph_ex(gm, example_inputs, **kwargs):
    from torch_npu.dynamo.torchair import CompilerConfig, get_npu_backend
    config = CompilerConfig()
    config.mode = "npugraph_ex"
    return get_npu_backend(compiler_config=config)(gm, example_inputs, **kwargs)


def npugraphs(gm, example_inputs, **kwargs):
    raise NotImplementedError("the 'npugraphs' backend captures NPU graphs (torch.npu.NPUGraph), which vNPU does "
                              "not support yet; use backend='npu' or 'inductor'")
