"""NpuCachedDropout (alias NpuFairseqDropout): dropout with its masks drawn ahead.

Made for fairseq models, where many dropouts of few shapes run per step.
Each mask is drawn on a side stream after the model's forward, for the next
step, so drawing it leaves the forward's critical path (``_draw_ahead``
describes the queue protocol). Real torch_npu draws packed bit masks with
``npu_dropout_gen_mask`` and applies them with ``npu_dropout_do_mask``;
vNPU draws a bool keep-mask, ``rand >= p``, and applies it as
``x * keep / (1 - p)``: the same distribution and scaling.

Behaviour a caller sees:
- the first call of each (shape, dtype, device, p) returns ``x`` unchanged;
  once ``enable_dropout_ensemble(model)`` has hooked the model and a
  forward has run, every call consumes one mask. The module has no eval
  switch of its own (real torch_npu's neither): the hooks decide.
- ``dropout([shape, dtype, device])`` returns the next mask itself (None
  while there is none), for callers that apply it themselves.
"""

import torch

from ._draw_ahead import queue_for, refill_on, wait_for

__all__ = ["NpuCachedDropout", "NpuFairseqDropout"]


def _split_input(x):
    """(shape, dtype, device, the tensor or None) of a call's argument."""
    if isinstance(x, torch.Tensor):
        return x.shape, x.dtype, x.device, x
    if isinstance(x, (list, tuple)) and len(x) == 3:
        shape, dtype, device = x
        return shape, dtype, device, None
    raise RuntimeError("input type error! Expected a tensor or [shape, dtype, device]")


class NpuCachedDropout(torch.nn.Dropout):
    """``NpuCachedDropout(p, module_name=None)``: see the module docstring."""

    # Shared by every instance: the side stream and the mask queues it fills.
    task_dict = {}
    dropout_stream = None

    def __init__(self, p, module_name=None):
        super().__init__(p)
        self.module_name = module_name

    def _mask_queue(self, shape, dtype, device):
        shape, device, p = tuple(shape), torch.device(device), self.p
        return queue_for(NpuCachedDropout.task_dict, (shape, dtype, device, p),
                         lambda: torch.rand(shape, device=device) >= p)

    def forward(self, x):
        shape, dtype, device, tensor = _split_input(x)
        if self.p == 0:
            return tensor
        keep = self._mask_queue(shape, dtype, device).take()
        if tensor is None:
            return keep  # asked for the mask itself
        if keep is None:
            return tensor
        return tensor * keep.to(tensor.dtype) / (1. - self.p)

    @classmethod
    def enable_dropout_ensemble(cls, model):
        """Hooks ``model``: its forward first waits for the masks drawn so far,
        and once it has run the masks of the next step are drawn on the side stream."""
        if cls.dropout_stream is None:
            cls.dropout_stream = torch.npu.Stream()
        model.register_forward_pre_hook(lambda module, inputs: wait_for(cls.dropout_stream))
        model.register_forward_hook(lambda module, inputs, outputs: refill_on(cls.dropout_stream,
                                                                              cls.task_dict.values()))


NpuFairseqDropout = NpuCachedDropout
