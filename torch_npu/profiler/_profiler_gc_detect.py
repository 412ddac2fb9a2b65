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


class ProfGCDetector:
    SAVE_FILE = "torch.gc_record"
    START_PHASE = "start"  # gc.callbacks' phases
    STOP_PHASE = "stop"

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold * Constant.NS_TO_MS  # ms -> ns
        self.time_info = {}  # pid -> (monotonic ns, timestamp) of the collection running
        self.save_info = []  # (pid, start, end) of the collections kept
        self.get_cur_ts = _get_syscnt if _get_syscnt_enable() else _get_monotonic

    def start(self):
        if self.gc_callback not in gc.callbacks:
            gc.callbacks.append(self.gc_callback)

    def stop(self):
        if self.gc_callback in gc.callbacks:
            gc.callbacks.remove(self.gc_callback)
        self.time_info.clear()
        self.save()
        self.save_info = []

    def save(self):
        """Writes the records kept into the profile's FRAMEWORK folder."""
        if not self.save_info:
            return
        payload = b"".join(struct.pack(Constant.GC_RECORD_FORMAT, *record) for record in self.save_info)
        prof_dir = ProfPathCreator().get_prof_dir()
        # FRAMEWORK/ may not exist yet (get_fwk_path then answers ''): the file creates it.
        fwk_dir = ProfilerPathManager.get_fwk_path(prof_dir) or os.path.join(prof_dir, Constant.FRAMEWORK_DIR)
        output_path = os.path.join(fwk_dir, self.SAVE_FILE)
        try:
            FileManager.create_bin_file_by_path(output_path, payload)
        except Exception:  # noqa: BLE001 - a lost record must not fail the profile
            print_error_msg(f"Can't create file: {output_path}" + prof_error(ErrCode.SYSCALL))

    def gc_callback(self, phase, info):
        pid = os.getpid()  # a forked child inherits the hook: its records carry its pid
        now = _get_monotonic()
        if phase == self.START_PHASE:
            self.time_info[pid] = (now, self.get_cur_ts())
        elif phase == self.STOP_PHASE:
            started = self.time_info.pop(pid, None)
            if started is None:
                print_warn_msg("Invalid pid in GC detect.")
            elif now - started[0] >= self.threshold:
                self.save_info.append((pid, started[1], self.get_cur_ts()))
        else:
            print_warn_msg("Invalid GC detect phase.")
