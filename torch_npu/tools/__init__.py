"""vNPU tools: op coverage (op_coverage), model compatibility (check_model)
and the Ascend cost model (estimate)."""

from torch_npu.tools.check_model import CompatibilityReport, check_compatibility, check_model  # noqa: F401
from torch_npu.tools.cost_model import estimate  # noqa: F401
