"""NpuPreGenDropout: dropout whose bit masks are drawn ahead, one large mask per probability.

Unlike NpuCachedDropout, which queues a mask per call shape, this module
draws a single packed bit mask per dropout probability per step, sized for
many calls, and hands each call the next slice of it:

- ``npu_dropout_gen_mask`` makes the mask: one bit per element, each call's
  share padded to a whole number of 128-element blocks (16 bytes each);
  ``npu_dropout_do_mask`` applies a slice to the call's input;
- every probability of an ``NpuPreGenDropout`` made before
  ``enable_dropout_ensemble(model)`` gets its mask there, on a side stream;
  after each forward of the model the used masks are replaced by fresh
  ones, drawn once the forward's reads of the old ones are queued;
- the mask holds ``max_mb`` Mi elements (``max_mb`` / 8 MiB). A step that
  needs more takes the start of the mask again for the call that overflows,
  and the masks drawn from then on are made large enough for it.

``dropout([shape, dtype, device])`` returns the slice the next call of that
shape would take, without taking it, for callers that apply it themselves.
"""

import math

import torch

import torch_npu
from torch_npu.utils._error_code import ErrCode, ops_error

__all__ = ["NpuPreGenDropout"]

_ELEMENTS_PER_MB = 1 << 20  # max_mb counts mask elements (bits) in Mi
_BLOCK_ELEMENTS = 128  # the gen/do-mask kernels work in blocks of 128 elements
_BITS_PER_BYTE = 8


def _slice_bytes(shape):
    """Bytes of packed mask one call of ``shape`` uses: whole 128-element blocks."""
    blocks = -(-math.prod(int(size) for size in shape) // _BLOCK_ELEMENTS)
    return blocks * _BLOCK_ELEMENTS // _BITS_PER_BYTE


class _PreGenDropoutTask:
    """The packed mask of one dropout probability, and the calls' position in it.

    ``mask``: uint8, the current step's bits; ``idx``: bytes handed out this
    step; ``max_mb``: the size of the masks drawn next, in Mi elements.
    """

    def __init__(self, device, p):
        self.device = device
        self.p = p
        self.max_mb = 16
        self.mask = None
        self.idx = 0

    def draw(self):
        """Replaces the mask with a fresh one of ``max_mb`` Mi elements; the
        next call starts at its beginning."""
        self.mask = torch_npu.npu_dropout_gen_mask([self.max_mb, 1024, 1024], p=self.p, dtype=torch.float32,
                                                   device=self.device)
        self.idx = 0

    def peek(self, nbytes):
        return self.mask[self.idx:self.idx + nbytes]

    def take(self, nbytes):
        """The next ``nbytes`` of the mask. Past its end (the step needs more
        than was drawn), the start is reused this once and ``max_mb`` grows
        so that the next masks hold the whole step."""
        end = self.idx + nbytes
        self.idx = end
        if end <= self.mask.numel():
            return self.mask[end - nbytes:end]
        needed_mb = end * _BITS_PER_BYTE // _ELEMENTS_PER_MB + 1
        self.max_mb = max(self.max_mb, needed_mb)
        return self.mask[:nbytes]


def _input_shape(x):
    """The shape of the call, and whether it is a tensor to drop out (True)
    or a [shape, dtype, device] request for the mask (False)."""
    if isinstance(x, torch.Tensor):
        return x.shape, True
    if isinstance(x, (list, tuple)) and len(x) == 3:
        return x[0], False
    raise RuntimeError("input type error! NpuPreGenDropout takes a tensor or [shape, dtype, device], got "
                       f"{type(x).__name__}" + ops_error(ErrCode.TYPE))


class NpuPreGenDropout(torch.nn.Dropout):
    """``NpuPreGenDropout(p, module_name=None)``: see the module docstring."""

    prob = set()  # every instance's p: the masks enable_dropout_ensemble draws
    task_dict = {}  # p -> _PreGenDropoutTask
    dropout_stream = None

    def __init__(self, p, module_name=None):
        super().__init__(p)
        self.module_name = module_name
        NpuPreGenDropout.prob.add(p)

    def _task(self):
        task = NpuPreGenDropout.task_dict.get(self.p)
        if task is not None:
            return task
        raise RuntimeError(f"NpuPreGenDropout input prob error! No mask is drawn for p={self.p}: the "
                           f"probabilities registered by enable_dropout_ensemble are "
                           f"{sorted(NpuPreGenDropout.task_dict)}; make every NpuPreGenDropout before "
                           "calling it" + ops_error(ErrCode.VALUE))

    def forward(self, x):
        shape, is_tensor = _input_shape(x)
        if self.p == 0:
            return x if is_tensor else None
        task = self._task()
        nbytes = _slice_bytes(shape)
        if not is_tensor:
            return task.peek(nbytes)
        return torch_npu.npu_dropout_do_mask(x, task.take(nbytes), self.p)[0]

    @classmethod
    def _draw_all(cls):
        for task in cls.task_dict.values():
            task.draw()

    @classmethod
    def enable_dropout_ensemble(cls, model):
        """Draws a mask for every probability made so far, and hooks ``model``
        so that each forward waits for its masks and is followed by the draw
        of the next step's."""
        if cls.dropout_stream is None:
            cls.dropout_stream = torch.npu.Stream()
        device = f"npu:{torch.npu.current_device()}"
        fresh = {p: _PreGenDropoutTask(device, p) for p in cls.prob}
        with torch.npu.stream(cls.dropout_stream):
            for task in fresh.values():
                task.draw()
        cls.task_dict.update(fresh)

        def before_forward(module, inputs):
            torch.npu.current_stream().wait_stream(cls.dropout_stream)

        def after_forward(module, inputs, outputs):
            # The new masks must not overwrite memory the forward's kernels
            # may still read: the side stream waits for them first.
            cls.dropout_stream.wait_stream(torch.npu.current_stream())
            with torch.npu.stream(cls.dropout_stream):
                cls._draw_all()

        model.register_forward_pre_hook(before_forward)
        model.register_forward_hook(after_forward)
