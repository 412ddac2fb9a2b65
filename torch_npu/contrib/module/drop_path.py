"""Drop path (stochastic depth) whose random tensors are drawn ahead on a side stream.

Reference: timm's DropPath. Per sample, the whole residual branch is kept
with probability keep = 1 - drop_prob and then scaled by 1 / keep:
out = x / keep * floor(keep + U[0, 1)), U of shape (batch, 1, ..., 1).

Real torch_npu's NpuDropPath takes the random tensors from a queue filled by
a forward pre-hook on a side stream (``enable_droppath_ensemble(model)``),
so drawing them overlaps the forward. The protocol is kept as is: a call
whose (shape, device, dtype) has no queued tensor only registers the
request and returns ``x`` unchanged; once the hook has run, each call
consumes one queued tensor.

One change in order: real torch_npu registers the hook that makes the
current stream wait for the side stream before the hook that draws, so a
step consumes tensors drawn after that wait, and reading them races with
the side stream's kernel (on a chip the draw usually wins; on vNPU's
asynchronous streams a test saw all-zero masks). Here the draw comes
first, then the wait: the same tensors, the same overlap with earlier work,
and no race.
"""

import torch
import torch.nn as nn

__all__ = ["NpuDropPath", "npu_drop_path"]


def npu_drop_path(x, random_tensor, keep_prob=0.):
    """x / keep_prob * floor(keep_prob + random_tensor) (``random_tensor`` is consumed)."""
    random_tensor = random_tensor + keep_prob
    return x.div(keep_prob) * random_tensor.floor_()


class _DropPathTask:
    """The random tensors queued for one (shape, device, dtype, ndim) and how many a step needs."""

    def __init__(self, shape, device, dtype, ndim, drop_prob):
        self.shape = shape
        self.device = device
        self.dtype = dtype
        self.ndim = ndim
        self.drop_prob = drop_prob
        self.request_count = 0
        self.rand_queue = []


class NpuDropPath(nn.Module):
    """NpuDropPath(drop_prob): identity in eval mode or when drop_prob == 0."""

    task_dict = {}
    droppath_stream = None

    def __init__(self, drop_prob=None):
        super().__init__()
        if drop_prob is None or not 0. <= drop_prob < 1.:
            raise ValueError(f"drop_prob should be in [0, 1), but got {drop_prob}")
        self.drop_prob = drop_prob
        self.keep_prob = 1 - drop_prob

    def forward(self, x):
        if self.drop_prob == 0. or not self.training:
            return x
        if not isinstance(x, torch.Tensor):
            raise RuntimeError("input type error!")
        key = (x.shape, x.device, x.dtype, x.ndim)
        task = NpuDropPath.task_dict.get(key)
        if task is None:
            task = _DropPathTask(x.shape, x.device, x.dtype, x.ndim, self.drop_prob)
            NpuDropPath.task_dict[key] = task
        if not task.rand_queue:
            task.request_count += 1
            return x
        return npu_drop_path(x, task.rand_queue.pop(0), self.keep_prob)

    @classmethod
    def enable_droppath_ensemble(cls, model):
        """Hooks ``model`` to draw the next step's random tensors on a side stream before its forward."""
        if cls.droppath_stream is None:
            cls.droppath_stream = torch.npu.Stream()

        def wait_for_random_tensors(module, inputs):
            torch.npu.current_stream().wait_stream(cls.droppath_stream)

        def draw_random_tensors(module, inputs):
            with torch.npu.stream(cls.droppath_stream), torch.no_grad():
                for task in cls.task_dict.values():
                    shape = (task.shape[0],) + (1,) * (task.ndim - 1)
                    while len(task.rand_queue) < task.request_count:
                        task.rand_queue.append(torch.rand(shape, dtype=task.dtype, device=task.device))

        model.register_forward_pre_hook(draw_random_tensors)
        model.register_forward_pre_hook(wait_for_random_tensors)  # after the draw: see the module's docstring
