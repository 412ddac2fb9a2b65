"""NpuDropPath: stochastic depth (timm's DropPath) with its random numbers drawn ahead.

Drop path keeps or drops a residual branch per sample: with keep = 1 - drop_prob,

    out = x / keep * floor(keep + u),    u ~ U[0, 1) of shape (batch, 1, ..., 1)

so each sample is either zeroed or scaled by 1 / keep.

Drawing ``u`` sits on the forward's critical path, so the module takes it
from a queue per input (shape, device, dtype) that a forward pre-hook on the
model fills on a side stream (``NpuDropPath.enable_droppath_ensemble(model)``),
as real torch_npu does; ``_draw_ahead`` describes the protocol. The first
step, which discovers the shapes, drops nothing.

Note [Drop path hook order]: the model gets two pre-hooks, one that draws on
the side stream and one that makes the current stream wait for the side
stream. Real torch_npu registers the wait first, so the step's tensors are
drawn after the wait and the forward may read them while the side stream is
still writing them (harmless on a chip, where the draw is fast; vNPU's
asynchronous streams made a test see all-zero masks). vNPU draws first and
waits second: the same tensors, the draw still overlapping earlier work, and
no race.
"""

from typing import Optional

import torch
import torch.nn as nn

from ._draw_ahead import DrawAheadQueue, queue_for, refill_on, wait_for

__all__ = ["NpuDropPath", "npu_drop_path"]


def npu_drop_path(x: torch.Tensor, random_tensor: torch.Tensor, keep_prob: float = 0.) -> torch.Tensor:
    """Applies drop path to ``x`` given ``random_tensor`` ~ U[0, 1), broadcast
    over the non-batch dimensions: x / keep_prob * floor(keep_prob + random_tensor)."""
    keep_mask = torch.floor(random_tensor + keep_prob)  # 1 with probability keep_prob, else 0
    return x.div(keep_prob) * keep_mask


class NpuDropPath(nn.Module):
    """Drop path with pre-drawn randomness; an identity in eval mode and when
    ``drop_prob`` is 0. See the module docstring for the protocol."""

    # Shared by every instance: the side stream and the queues it fills.
    task_dict = {}
    droppath_stream = None

    def __init__(self, drop_prob: Optional[float] = None):
        super().__init__()
        valid = drop_prob is not None and 0. <= drop_prob < 1.
        if not valid:
            raise ValueError(f"drop_prob should be in [0, 1), but got {drop_prob}")
        self.drop_prob = drop_prob
        self.keep_prob = 1 - drop_prob

    @staticmethod
    def _queue_for(x: torch.Tensor) -> DrawAheadQueue:
        # One number per sample, broadcast over the rest of the sample.
        draw_shape = (x.shape[0],) + (1,) * (x.dim() - 1)
        dtype, device = x.dtype, x.device
        return queue_for(NpuDropPath.task_dict, (x.shape, device, dtype),
                         lambda: torch.rand(draw_shape, dtype=dtype, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        active = self.training and self.drop_prob != 0.
        if not active:
            return x
        if not isinstance(x, torch.Tensor):
            raise RuntimeError("input type error!")
        random_tensor = self._queue_for(x).take()
        if random_tensor is None:
            return x
        return npu_drop_path(x, random_tensor, self.keep_prob)

    @classmethod
    def enable_droppath_ensemble(cls, model: nn.Module) -> None:
        """Hooks ``model`` so that before each forward the random tensors its
        drop paths consume are drawn on a side stream (Note [Drop path hook order])."""
        if cls.droppath_stream is None:
            cls.droppath_stream = torch.npu.Stream()
        # Hooks run in registration order: draw, then wait (the Note).
        model.register_forward_pre_hook(lambda module, inputs: refill_on(cls.droppath_stream,
                                                                         cls.task_dict.values()))
        model.register_forward_pre_hook(lambda module, inputs: wait_for(cls.droppath_stream))
