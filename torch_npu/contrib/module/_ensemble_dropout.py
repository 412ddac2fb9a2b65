"""NpuPreGenDropout: dropout whose bit masks are drawn ahead, one big mask per
probability per step.

Each dropout probability a model uses (every ``NpuPreGenDropout(p)`` made
before ``enable_dropout_ensemble(model)``) gets one packed bit mask for
``max_mb`` x 2**20 elements (``npu_dropout_gen_mask``: ``max_mb`` / 8 MiB),
drawn on a side stream after each
forward. A forward call takes the next slice of its probability's mask (one
bit per element, rounded up to 128 elements, as ``npu_dropout_gen_mask``
packs them) and applies it with ``npu_dropout_do_mask``. A step that needs
more bits than the mask holds reuses its start and grows ``max_mb`` for the
masks drawn after it.

Called with ``[shape, dtype, device]`` instead of a tensor, it returns the
slice itself (for ops that apply it themselves) without consuming it.
"""

import torch

import torch_npu
from torch_npu.utils._error_code import ErrCode, ops_error

__all__ = ["NpuPreGenDropout"]

_MIB = 1024 * 1024
_ELEMENTS_PER_BLOCK = 128  # npu_dropout_gen_mask pads each mask to 128 elements (16 bytes)


class _PreGenDropoutTask:
    """The mask drawn for one probability, and how much of it was used."""

    def __init__(self, device, p):
        self.device = device
        self.p = p
        self.mask = None
        self.idx = 0  # bytes of `mask` used this step
        self.max_mb = 16  # elements of the next mask, in units of 2**20 (one bit each)

    def draw(self):
        self.mask = torch_npu.npu_dropout_gen_mask([self.max_mb, 1024, 1024], p=self.p, dtype=torch.float32,
                                                   device=self.device)
        self.idx = 0


def _mask_bytes(shape):
    numel = 1
    for size in shape:
        numel *= int(size)
    blocks = (numel + _ELEMENTS_PER_BLOCK - 1) // _ELEMENTS_PER_BLOCK
    return blocks * _ELEMENTS_PER_BLOCK // 8


class NpuPreGenDropout(torch.nn.Dropout):
    """NpuPreGenDropout(p, module_name=None); see the module docstring."""

    prob = set()  # the probabilities of every instance made
    task_dict = {}  # probability -> _PreGenDropoutTask, once enable_dropout_ensemble ran
    dropout_stream = None

    def __init__(self, p, module_name=None):
        super().__init__(p)
        self.module_name = module_name
        NpuPreGenDropout.prob.add(p)

    def forward(self, x):
        if isinstance(x, torch.Tensor):
            shape, apply_mask, unchanged = x.shape, True, x
        elif isinstance(x, (list, tuple)) and len(x) == 3:
            shape, apply_mask, unchanged = x[0], False, None
        else:
            raise RuntimeError("input type error! NpuPreGenDropout takes a tensor or [shape, dtype, device], got "
                               f"{type(x).__name__}" + ops_error(ErrCode.TYPE))
        if self.p == 0:
            return unchanged
        task = NpuPreGenDropout.task_dict.get(self.p)
        if task is None:
            raise RuntimeError(f"NpuPreGenDropout input prob error! No mask is drawn for p={self.p}: the "
                               f"probabilities registered by enable_dropout_ensemble are "
                               f"{sorted(NpuPreGenDropout.task_dict)}; make every NpuPreGenDropout before "
                               "calling it" + ops_error(ErrCode.VALUE))
        length = _mask_bytes(shape)
        end = task.idx + length
        mask = task.mask[task.idx:end]
        if not apply_mask:
            return mask
        task.idx = end
        if end > task.mask.numel():
            # This step needs more bits than were drawn: reuse the start now,
            # draw enough from the next step on.
            task.max_mb = max(end * 8 // _MIB + 1, task.max_mb)
            mask = task.mask[:length]
        return torch_npu.npu_dropout_do_mask(x, mask, self.p)[0]

    @classmethod
    def enable_dropout_ensemble(cls, model):
        """Draws a mask per registered probability, and hooks ``model`` to wait
        for the side stream before each forward and to draw the next masks
        there after it."""
        if cls.dropout_stream is None:
            cls.dropout_stream = torch.npu.Stream()

        def wait_for_masks(module, inputs):
            torch.npu.current_stream().wait_stream(cls.dropout_stream)

        def draw_next_masks(module, inputs, outputs):
            cls.dropout_stream.wait_stream(torch.npu.current_stream())  # the old masks' last readers
            with torch.npu.stream(cls.dropout_stream):
                for task in cls.task_dict.values():
                    task.draw()

        device = f"npu:{torch.npu.current_device()}"
        with torch.npu.stream(cls.dropout_stream):
            for p in cls.prob:
                task = _PreGenDropoutTask(device, p)
                task.draw()
                cls.task_dict[p] = task
        model.register_forward_pre_hook(wait_for_masks)
        model.register_forward_hook(draw_next_masks)
