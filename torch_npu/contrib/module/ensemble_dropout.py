"""Dropout whose masks are drawn ahead, after each forward (fairseq models).

Real torch_npu's NpuCachedDropout (alias NpuFairseqDropout) generates the
masks with npu_dropout_gen_mask in a forward hook and applies them with
npu_dropout_do_mask, so mask generation leaves the critical path. vNPU keeps
the protocol and writes the mask as a bool keep-mask from ``torch.rand``,
applied as x * keep / (1 - p):

- a call whose (shape, dtype, device, p) has no queued mask registers the
  request and returns ``x`` unchanged (as real torch_npu does, including in
  eval mode: the module has no training switch of its own);
- ``enable_dropout_ensemble(model)`` adds a forward hook that tops up every
  queue to its request count, so from the next step on each call consumes
  one mask;
- called with ``[shape, dtype, device]`` instead of a tensor, it returns the
  queued mask itself (or None), for ops that apply it themselves.
"""

import torch

__all__ = ["NpuCachedDropout", "NpuFairseqDropout"]


class _DropOutTask:
    """The masks queued for one (shape, dtype, device, p) and how many a step needs."""

    def __init__(self, shape, dtype, device, p):
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.p = p
        self.request_count = 0
        self.mask_queue = []


def _apply_mask(x, keep, p):
    return x * keep.to(x.dtype) / (1. - p)


class NpuCachedDropout(torch.nn.Dropout):
    """NpuCachedDropout(p, module_name=None); see the module docstring for the protocol."""

    task_dict = {}
    dropout_stream = None

    def __init__(self, p, module_name=None):
        super().__init__(p)
        self.module_name = module_name

    def forward(self, x):
        if isinstance(x, torch.Tensor):
            shape, dtype, device = x.shape, x.dtype, x.device
            do_mask, unchanged = True, x
        elif isinstance(x, (list, tuple)) and len(x) == 3:
            shape, dtype, device = x
            do_mask, unchanged = False, None
        else:
            raise RuntimeError("input type error! Expected a tensor or [shape, dtype, device]")
        if self.p == 0:
            return unchanged
        key = (tuple(shape), dtype, torch.device(device), self.p)
        task = NpuCachedDropout.task_dict.get(key)
        if task is None:
            task = _DropOutTask(tuple(shape), dtype, torch.device(device), self.p)
            NpuCachedDropout.task_dict[key] = task
        if not task.mask_queue:
            task.request_count += 1
            return unchanged
        keep = task.mask_queue.pop(0)
        return _apply_mask(x, keep, self.p) if do_mask else keep

    @classmethod
    def enable_dropout_ensemble(cls, model):
        """Hooks ``model``: wait for the side stream before forward, draw the next masks after it."""
        if cls.dropout_stream is None:
            cls.dropout_stream = torch.npu.Stream()

        def wait_for_masks(module, inputs):
            torch.npu.current_stream().wait_stream(cls.dropout_stream)

        def draw_masks(module, inputs, outputs):
            with torch.npu.stream(cls.dropout_stream), torch.no_grad():
                for task in cls.task_dict.values():
                    while len(task.mask_queue) < task.request_count:
                        task.mask_queue.append(torch.rand(task.shape, device=task.device) >= task.p)

        model.register_forward_pre_hook(wait_for_masks)
        model.register_forward_hook(draw_masks)


NpuFairseqDropout = NpuCachedDropout
