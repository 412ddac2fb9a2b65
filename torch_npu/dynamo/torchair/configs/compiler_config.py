"""torchair.CompilerConfig: the options vNPU gives a meaning to.

- ``mode``: "max-autotune" (default; Inductor-compiled kernels on npu
  streams), "reduce-overhead" and "npugraph_ex" (the same compiled graph,
  replayed as an NPU graph: torch.npu.NPUGraph).
- ``debug.graph_dump.type`` "txt" or "py" (and ``.path``): each FX graph the
  backend receives is written to ``{path}/dynamo_original_graph_{n}_{time}.{type}``.
  "pbtxt" is GE's protobuf, which vNPU has no GE to produce: it raises.
- ``debug.run_eagerly``: run the FX graphs eagerly instead of compiling
  them (to tell compiler problems from model problems).
"""

from torch_npu.dynamo.torchair.configs.option_base import NpuBaseConfig, OptionValue


class _GraphDump(NpuBaseConfig):
    def __init__(self):
        self.type = OptionValue(None, ["txt", "pbtxt", "py"])
        self.path = OptionValue(None, None)
        super().__init__()

    @property
    def enabled(self):
        return self.type.value is not None


class _DebugConfig(NpuBaseConfig):
    def __init__(self):
        self.graph_dump = _GraphDump()
        self.run_eagerly = OptionValue(False, [True, False])
        super().__init__()


class CompilerConfig(NpuBaseConfig):
    """Set CompilerConfig configuration"""

    def __init__(self):
        self.debug = _DebugConfig()
        self.mode = OptionValue("max-autotune", ["max-autotune", "reduce-overhead", "npugraph_ex"])
        super().__init__()
