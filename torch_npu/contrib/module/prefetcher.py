"""Copies the next (input, target) batch to npu on a side stream while the current one trains.

Origin: PytorchInsight's data_prefetcher. ``next()`` makes the current
stream wait for the copy stream, hands out the prefetched pair and starts
copying the following one; it returns (None, None) once the loader is
exhausted.
"""

import torch

__all__ = ["Prefetcher"]


class Prefetcher:
    """Prefetcher(loader, stream=None); ``stream`` defaults to a new torch.npu.Stream."""

    def __init__(self, loader, stream=None):
        self.loader = iter(loader)
        self.stream = stream if stream is not None else torch.npu.Stream()
        self.next_input = None
        self.next_target = None
        self.preload()

    def preload(self):
        try:
            self.next_input, self.next_target = next(self.loader)
        except StopIteration:
            self.next_input = None
            self.next_target = None
            return
        with torch.npu.stream(self.stream):
            self.next_input = self.next_input.npu(non_blocking=True)
            self.next_target = self.next_target.npu(non_blocking=True)

    def next(self):
        torch.npu.current_stream().wait_stream(self.stream)
        next_input, next_target = self.next_input, self.next_target
        if next_target is not None:
            # The consumer's stream uses the tensors: the allocator must not
            # recycle them when the copy stream is done with them.
            next_input.record_stream(torch.npu.current_stream())
            next_target.record_stream(torch.npu.current_stream())
            self.preload()
        return next_input, next_target
