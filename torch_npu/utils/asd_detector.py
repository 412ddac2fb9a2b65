"""Real torch_npu's older path of register_asd_hook / set_asd_loss_scale."""

from torch_npu.utils._asd_detector import register_asd_hook, set_asd_loss_scale  # noqa: F401

__all__ = []
