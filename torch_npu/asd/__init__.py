"""torch_npu.asd: silent data corruption (SDC) checks, as real torch_npu ships them.

- ``checksum``: ``torch_npu.matmul_checksum(a, b, c)``, an algorithm-based
  check that ``c`` is ``a @ b``. It is arithmetic on tensors, so it runs here
  as it does on an Ascend chip.
- ``asd``: the gradient checks real torch_npu arms with ``NPU_ASD_ENABLE``,
  ``NPU_ASD_CONFIG`` and ``torch_npu.utils.register_asd_hook``: their
  settings, validated as real torch_npu validates them; vNPU does not
  perform these checks and warns when asked to (see asd.py).
"""

from torch_npu.asd import checksum  # noqa: F401

__all__ = []
