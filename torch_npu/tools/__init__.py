"""vNPU tools: op coverage (op_coverage) and model compatibility (check_model)."""

from torch_npu.tools.check_model import CompatibilityReport, check_compatibility, check_model  # noqa: F401
