"""torch_npu.asd: silent data corruption (SDC) checks, as real torch_npu ships them.

- ``checksum``: ``torch_npu.matmul_checksum(a, b, c)``, an algorithm-based
  check that ``c`` is ``a @ b``. It is arithmetic on tensors, so it runs here
  as it does on an Ascend chip.
- The gradient checks real torch_npu arms with ``NPU_ASD_ENABLE`` and
  ``torch_npu.utils.register_asd_hook`` rely on the chip's silent-check
  kernels (``_npu_silent_check``); vNPU does not have them and
  ``torch_npu.utils`` says so when they are called.
"""

from torch_npu.asd import checksum  # noqa: F401

__all__ = []
