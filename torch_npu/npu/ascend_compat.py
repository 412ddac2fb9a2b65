"""torch.npu functions whose answer on the virtual NPU is fixed by what it is.

- current_blas_handle: NPUs have no BLAS handle; as in real torch_npu it
  warns and returns None.
- get_npu_overflow_flag / clear_npu_overflow_flag: the overflow register of
  saturation-mode chips. The virtual NPU computes with IEEE inf / nan
  (torch.npu.utils.is_support_inf_nan() is True, the 910B behaviour), where
  real torch_npu raises for the first and warns for the second: so does vNPU.
- set_mm_bmm_format_nd / get_mm_bmm_format_nd: whether matmul operands stay
  in ND format instead of FRACTAL_NZ. vNPU keeps every tensor in ND, so the
  answer is always True and asking for NZ (False) raises.
- ipc_collect: frees device memory other processes released after sharing it
  over IPC. The virtual NPU shares no device memory between processes
  (torch.npu.Event(interprocess=True) is refused), so there is nothing to
  collect and it returns at once.
- empty_virt_addr_cache: frees the virtual address ranges that the
  expandable-segments allocator keeps reserved. vNPU's allocator has no
  address ranges apart from its segments, so it frees the unused cached
  segments (as empty_cache), which is what memory_reserved() shows after it
  on the chip.
"""

import warnings

import torch

from torch_npu.npu.device import _lazy_init


def current_blas_handle():
    warnings.warn("NPU does not use blas handle.")
    return None


def get_npu_overflow_flag():
    raise RuntimeError("Unsupported api when soc_version >= Ascend910B1, please use npu_check_overflow "
                       "(the virtual NPU computes with IEEE inf/nan, like the 910B; check the tensors with "
                       "torch.isfinite).")


def clear_npu_overflow_flag():
    warnings.warn("When soc_version >= Ascend910B1, clear_npu_overflow_flag is useless, please remove it.")


def set_mm_bmm_format_nd(is_nd=True):
    if not is_nd:
        raise RuntimeError("torch.npu.set_mm_bmm_format_nd(False) is not supported on vNPU: every tensor "
                           "stays in ND format (there is no FRACTAL_NZ layout).")


def get_mm_bmm_format_nd():
    return True


def ipc_collect():
    _lazy_init()


def empty_virt_addr_cache():
    """Releases the virtual address space expandable segments keep after
    empty_cache unmapped their memory. The virtual NPU's segments are
    ordinary, so this releases the unused cached segments themselves, as
    empty_cache does: memory_reserved() then reads what it reads on the chip."""
    _lazy_init()
    torch.npu.empty_cache()
