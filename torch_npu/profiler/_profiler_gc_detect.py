"""Python's garbage collections during a profile (``gc_detect_threshold``).

While a profile with ``_ExperimentalConfig(gc_detect_threshold=ms)`` and the
CPU activity records, a ``gc.callbacks`` hook times every collection; those
that take at least the threshold are kept as (pid, start, end) records and
written, when the recording stops, to ``FRAMEWORK/torch.gc_record``
(Constant.GC_RECORD_FORMAT each). The analysis shows them as "GC" events
in trace_view.json. Times come from the profile's clock (_get_monotonic on
vNPU, which has no system counter), converted to the trace's at analysis.
"""

import gc
import os
import struct

from torch_npu._C._profiler import _get_monotonic, _get_syscnt, _get_syscnt_enable
from torch_npu.utils._error_code import ErrCode, prof_error
from torch_npu.profiler._profiler_path_creator import ProfPathCreator
from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_error_msg, print_warn_msg
from torch_npu.profiler.analysis.prof_common_func._file_manager import FileManager
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager

__all__ = []


def _framework_dir() -> str:
    """The FRAMEWORK folder of the profile being recorded, named even when it does not exist yet."""
    profile_dir = ProfPathCreator().get_prof_dir()
    existing = ProfilerPathManager.get_fwk_path(profile_dir)
    return existing if existing else os.path.join(profile_dir, Constant.FRAMEWORK_DIR)


def _encode_records(records) -> bytes:
    layout = struct.Struct(Constant.GC_RECORD_FORMAT)
    return b"".join(layout.pack(*record) for record in records)


class ProfGCDetector:
    """Times each garbage collection through ``gc.callbacks``; keeps those lasting ``threshold`` ms or more.

    The attribute names (threshold, time_info, save_info, get_cur_ts, the phase constants, gc_callback) are
    the ones torch_npu's tests read and set.
    """

    SAVE_FILE = "torch.gc_record"
    # The ``phase`` strings gc passes to its callbacks.
    START_PHASE = "start"
    STOP_PHASE = "stop"

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold * Constant.NS_TO_MS   # compared with monotonic nanoseconds
        # Durations are measured on the monotonic clock; the record itself carries the profile's timestamps.
        self.get_cur_ts = _get_syscnt if _get_syscnt_enable() else _get_monotonic
        self.time_info = {}    # pid -> (monotonic ns, profile timestamp) at the start of its running collection
        self.save_info = []    # (pid, start timestamp, end timestamp) of every collection kept

    # -- the gc hook

    def gc_callback(self, phase, info):
        # Keyed by pid: a child forked during the profile inherits this hook and reports its own collections.
        handlers = {self.START_PHASE: self._collection_began, self.STOP_PHASE: self._collection_ended}
        handler = handlers.get(phase)
        if handler is None:
            print_warn_msg("Invalid GC detect phase.")
        else:
            handler(os.getpid())

    def _collection_began(self, pid):
        self.time_info[pid] = (_get_monotonic(), self.get_cur_ts())

    def _collection_ended(self, pid):
        ended_ns = _get_monotonic()
        if pid not in self.time_info:
            print_warn_msg("Invalid pid in GC detect.")
            return
        began_ns, began_ts = self.time_info.pop(pid)
        if ended_ns - began_ns >= self.threshold:
            self.save_info.append((pid, began_ts, self.get_cur_ts()))

    # -- lifetime: hooked from start() to stop(), which writes what was kept

    def _set_hooked(self, hooked: bool) -> None:
        present = self.gc_callback in gc.callbacks
        if hooked and not present:
            gc.callbacks.append(self.gc_callback)
        elif present and not hooked:
            gc.callbacks.remove(self.gc_callback)

    def start(self):
        self._set_hooked(True)

    def stop(self):
        self._set_hooked(False)
        self.time_info.clear()   # a collection cut off by stop() is not one to report
        self.save()
        self.save_info = []

    def save(self):
        """Writes the records kept into FRAMEWORK/torch.gc_record; nothing when there are none."""
        if not self.save_info:
            return
        target = os.path.join(_framework_dir(), self.SAVE_FILE)
        try:
            FileManager.create_bin_file_by_path(target, _encode_records(self.save_info))
        except Exception:  # noqa: BLE001 - losing the GC records must not fail the profile
            print_error_msg(f"Can't create file: {target}" + prof_error(ErrCode.SYSCALL))
