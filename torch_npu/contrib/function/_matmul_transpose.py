"""Real torch_npu's private module name for ``MatmulApply`` (tests import it from here)."""

from .matmul_transpose import MatmulApply, matmul_transpose

__all__ = ["MatmulApply", "matmul_transpose"]
