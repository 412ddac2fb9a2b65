"""NPU graph trees: the NPU graphs that compiled code replays, per device.

Real torch_npu ports Inductor's CUDA graph trees: the graphs of one device
share one memory pool in a tree of recordings, a replay overwrites the
outputs the previous one returned, and so a function whose earlier outputs
are still alive (pending a backward, say) must be recorded again, which the
manager warns about once per function (``warned_functions``) unless the
program marks its steps (``torch.compiler.npugraph_mark_step_begin()``).

vNPU's replays (``NpuGraphRunner``, torch_npu/_inductor/npugraph_runner.py)
each own their pool and return fresh copies of their outputs: nothing a
caller holds is ever overwritten, so no function is recorded again for
that reason and ``warned_functions`` stays empty. What the manager of a
device does hold is the runners that recorded graphs there, so that
``reset_npugraph_trees()`` (``torch.compiler.reset()`` reaches it through the
"npugraphs" backend's reset) drops their graphs and memory pools; a runner
called after that records again.
"""

import threading
import weakref

from torch.utils._ordered_set import OrderedSet

__all__ = []

_lock = threading.Lock()
_managers = {}  # device index -> NPUGraphTreeManager


class NPUGraphTreeManager:
    """The NPU graphs recorded on one device."""

    def __init__(self, device_index):
        self.device_index = device_index
        # Functions warned about for being recorded again while their earlier
        # outputs were alive: none on vNPU (see the module's docstring).
        self.warned_functions = OrderedSet()
        self._runners = weakref.WeakSet()

    def add_runner(self, runner):
        """``runner`` recorded a graph on this device; ``reset`` will drop it."""
        self._runners.add(runner)

    def graph_count(self):
        return sum(runner.graph_count() for runner in list(self._runners))

    def reset(self):
        for runner in list(self._runners):
            runner.reset()
        self._runners.clear()
        self.warned_functions.clear()


def get_manager(device_index, create_if_none_exists=True):
    """The manager of npu ``device_index`` (made on first use unless
    ``create_if_none_exists`` is false, then None)."""
    with _lock:
        manager = _managers.get(device_index)
        if manager is None and create_if_none_exists:
            manager = _managers[device_index] = NPUGraphTreeManager(device_index)
        return manager


def reset_npugraph_trees():
    """Drops every NPU graph that compiled code recorded, on every device."""
    with _lock:
        managers = list(_managers.values())
        _managers.clear()
    for manager in managers:
        manager.reset()
