"""Random tensors drawn ahead of the forward that consumes them, on a side stream.

NpuDropPath and NpuCachedDropout take their randomness from queues that a
model hook fills while earlier work still runs, as real torch_npu does. The
protocol both follow:

- each distinct call site signature (shape, dtype, ...) has a queue;
- a call that finds its queue empty counts itself as one more request per
  step and goes without (the module returns its input unchanged);
- the hook draws on the side stream until every queue holds as many tensors
  as a step requests; the consuming stream waits for the side stream before
  it reads them.
"""

import collections
from typing import Callable, Dict, Iterable, Optional

import torch

__all__ = []


class DrawAheadQueue:
    """Tensors drawn by ``draw()`` ahead of the calls that take them, one each."""

    def __init__(self, draw: Callable[[], torch.Tensor]):
        self._draw = draw
        self.per_step = 0  # calls made while the queue was empty: how many a step takes
        self.ready = collections.deque()

    def take(self) -> Optional[torch.Tensor]:
        """The oldest drawn tensor; None (counted as one more request) when none is ready."""
        if self.ready:
            drawn = self.ready.popleft()
            # Drawn on the side stream, read on the current one: without this, freeing it after the
            # call would let the side stream's next draw reuse its memory before the read has run.
            drawn.record_stream(torch.npu.current_stream())
            return drawn
        self.per_step += 1
        return None

    def refill(self) -> None:
        while len(self.ready) < self.per_step:
            self.ready.append(self._draw())


def queue_for(queues: Dict, key, draw: Callable[[], torch.Tensor]) -> DrawAheadQueue:
    """The queue of ``key`` in ``queues``, made (drawing with ``draw``) on first use."""
    if key not in queues:
        queues[key] = DrawAheadQueue(draw)
    return queues[key]


def refill_on(side_stream, queues: Iterable[DrawAheadQueue]) -> None:
    """Tops every queue up with draws issued on ``side_stream``. The draws are
    inputs of the forward, not results: no autograd history."""
    with torch.no_grad(), torch.npu.stream(side_stream):
        for queue in queues:
            queue.refill()


def wait_for(side_stream) -> None:
    """Makes the current stream's later work wait for the draws issued so far."""
    torch.npu.current_stream().wait_stream(side_stream)
