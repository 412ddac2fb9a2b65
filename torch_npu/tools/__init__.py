"""vNPU tools: op coverage (op_coverage), model compatibility (check_model)
and the Ascend cost model (estimate)."""

from torch_npu.tools.check_model import CompatibilityReport, check_compatibility, check_model  # noqa: F401


def __getattr__(name):
    # The cost model's tables are imported at its first use: every process
    # imports this package (npu-smi's status files, torch_npu/tools/npu_smi.py).
    if name == "estimate":
        from torch_npu.tools.cost_model import estimate
        return estimate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
