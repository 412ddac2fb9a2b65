"""Overlap the host-to-npu copy of the next batch with the training step on the current one.

After PytorchInsight's data_prefetcher. The copy of batch k+1 is issued on a
side stream while the model works on batch k on the current stream. Two
orderings make this safe:

* before a batch is handed out, the current stream waits for the side stream,
  so kernels never read a half-copied tensor;
* the handed-out tensors are recorded on the current stream, so the caching
  allocator does not give their memory to the next copy while the model still
  reads them (they were allocated on the side stream).
"""

import torch

__all__ = ["Prefetcher"]


class Prefetcher:
    """Prefetcher(loader, stream=None): ``next()`` gives (input, target) on npu, then (None, None).

    ``loader`` yields (input, target) pairs of host tensors; ``stream`` is the
    side stream for the copies, a new torch.npu.Stream() by default.
    """

    def __init__(self, loader, stream=None):
        self.loader = iter(loader)
        self.stream = torch.npu.Stream() if stream is None else stream
        self.preload()  # sets next_input / next_target

    def next(self):
        """The prefetched pair, ready to use on the current stream; starts prefetching the one after."""
        consumer = torch.npu.current_stream()
        consumer.wait_stream(self.stream)
        ready = (self.next_input, self.next_target)
        if ready[1] is None:
            return ready
        for tensor in ready:
            tensor.record_stream(consumer)
        self.preload()
        return ready

    def preload(self):
        """Issue the copy of the loader's next pair on the side stream (both None once it is exhausted)."""
        pair = next(self.loader, None)
        self.next_input, self.next_target = (None, None) if pair is None else self._copy_to_npu(pair)

    def _copy_to_npu(self, pair):
        # Issued on the side stream and asynchronous: next() makes the consumer wait for it.
        with torch.npu.stream(self.stream):
            return tuple(t.npu(non_blocking=True) for t in pair)
