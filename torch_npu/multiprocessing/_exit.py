"""A child process outlives the file descriptors it shared.

Note [A producer outlives its shared descriptors]
A CPU tensor put on a ``torch.multiprocessing`` queue travels as a file
descriptor of its shared memory. The descriptor is not in the message: the
receiver fetches it from the sender's ``multiprocessing.resource_sharer``
(a listener thread of the sender) when it unpickles the message. A sender
that returns right after ``queue.put(t.cpu())`` may therefore be gone when
the receiver reads, and the read fails (FileNotFoundError,
ConnectionResetError or EOFError, depending on how far the sender got).
PyTorch's documentation asks the producer to stay alive; on Ascend hardware
the pattern works in practice, because a rank's exit (HCCL, the device) takes
longer than the parent's read, and real torch_npu's own multi-process tests
rely on it (``test_silent_check.py``, ``test_send_recv.py``). A virtual NPU's
process exits at once, so the race is lost.

So a child process of ``multiprocessing`` that imported torch_npu, at exit,
first lets its queues' feeder threads send what was put (they pickle the
messages, which registers the descriptors), then waits until every
descriptor has been fetched, for at most ``_WAIT_SECONDS``, and stops the
sharer, which finishes the send in progress. DataLoader workers do not wait:
their loader ends them when it is done with them, and batches it never read
would only delay that. The main process never waits.
"""

import time
from multiprocessing import process, resource_sharer, util

_WAIT_SECONDS = 10.0
# multiprocessing's exit finalizers run by priority, highest first: a queue's
# close (10) tells its feeder thread to finish; the resource sharer's socket
# file is unlinked at 0, after which the receiver cannot connect; the feeder is
# joined at -5. The wait goes between the close and the unlink, and joins the
# feeders itself.
_EXIT_PRIORITY = 5


def _pending_descriptors():
    return len(getattr(resource_sharer._resource_sharer, "_cache", ()))


def _is_dataloader_worker():
    from torch.utils.data import get_worker_info
    return get_worker_info() is not None


def _flush_queues():
    """Joins the queues' feeder threads now rather than at their own finalizer (-5): a
    message is pickled, and its descriptors registered, by the feeder thread."""
    from multiprocessing import queues  # at exit: importing it with torch_npu would cost every process

    for finalizer in list(util._finalizer_registry.values()):
        if getattr(finalizer, "_callback", None) is queues.Queue._finalize_join:
            finalizer()


def _wait_for_pending_descriptors():
    if process.parent_process() is None or _is_dataloader_worker():
        return
    _flush_queues()
    if not _pending_descriptors():
        return
    deadline = time.monotonic() + _WAIT_SECONDS
    while _pending_descriptors() and time.monotonic() < deadline:
        time.sleep(0.005)
    # The sharer takes a descriptor out of its table before it sends it: stopping it
    # (a request it serves after the one in progress) lets that last send finish.
    resource_sharer.stop(timeout=_WAIT_SECONDS)


def install():
    """Registers the wait with multiprocessing's exit finalizers (once per process)."""
    util.Finalize(None, _wait_for_pending_descriptors, exitpriority=_EXIT_PRIORITY)
