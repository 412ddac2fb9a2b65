"""Reads the framework's raw records of a profile (FRAMEWORK/torch.*) and turns them into the
timeline's host events and into the api rows of export_type "db"."""

import os
from collections import defaultdict
from enum import Enum

from torch_npu.profiler.analysis._profiler_config import ProfilerConfig
from torch_npu.profiler.analysis.prof_bean._gc_record_bean import GCRecordBean
from torch_npu.profiler.analysis.prof_bean._op_mark_bean import OpMarkBean
from torch_npu.profiler.analysis.prof_bean._torch_op_bean import TorchOpBean
from torch_npu.profiler.analysis.prof_common_func._binary_decoder import BinaryDecoder
from torch_npu.profiler.analysis.prof_common_func._constant import ApiType, Constant, TorchOpDataOri, contact_2num
from torch_npu.profiler.analysis.prof_common_func._file_manager import FileManager
from torch_npu.profiler.analysis.prof_common_func._id_manager import CallChainIdManager, ConnectionIdManager, Str2IdManager
from torch_npu.profiler.analysis.prof_common_func._log import ProfilerLogger
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager
from torch_npu.profiler.analysis.prof_common_func._tlv_decoder import TLVDecoder
from torch_npu.profiler.analysis.prof_common_func._trace_event_manager import TraceEventManager

__all__ = []


def _log_warning(message, *args):
    try:
        ProfilerLogger.get_instance().warning(message, *args)
    except Exception:  # the analysis log is not open
        pass


# get_fwk_api's entry holding (Str2IdManager, ConnectionIdManager, CallChainIdManager) that numbered its rows
ID_MANAGERS = "id_managers"


class FwkFileTag(Enum):
    """The framework's record files: (file name, bean, whether the records carry TLV text)."""
    TORCH_OP = ("torch.op_range", TorchOpBean, True)
    OP_MARK = ("torch.op_mark", OpMarkBean, True)
    GC_RECORD = ("torch.gc_record", GCRecordBean, False)


class FwkFileParser:
    def __init__(self, profiler_path: str):
        self._profiler_path = profiler_path
        self._fwk_path = ProfilerPathManager.get_fwk_path(profiler_path)
        self._file_names = set(os.listdir(self._fwk_path)) \
            if self._fwk_path and os.path.isdir(self._fwk_path) else set()
        # the numbering of names, connection-id lists and call stacks get_fwk_api used
        self.str_ids = self.connection_ids = self.callchain_ids = None

    # --- raw records -----------------------------------------------------------------------------
    def get_file_data_by_tag(self, tag: FwkFileTag) -> list:
        file_name, bean, tagged = tag.value
        path = os.path.join(self._fwk_path or "", file_name)
        if file_name not in self._file_names or not os.path.isfile(path):
            return []
        raw = FileManager.file_read_all(path, "rb")
        if tagged:
            return TLVDecoder.decode(raw, bean, bean.record_size())
        return BinaryDecoder.decode(raw, bean, bean.record_size())

    def get_task_queue_data(self) -> tuple:
        """(enqueues, dequeues): each a mark bean spanning from its start mark to its end mark."""
        opened, spans = {}, {True: [], False: []}
        for mark in sorted(self.get_file_data_by_tag(FwkFileTag.OP_MARK), key=lambda m: m.time_ns):
            side = mark.is_enqueue
            key = (side, mark.corr_id)
            if mark.is_enqueue_start or mark.is_dequeue_start:
                opened[key] = mark
            elif key in opened:
                start = opened.pop(key)
                start.dur = mark.time_ns - start.time_ns
                spans[side].append(start)
        if opened:
            _log_warning("%d task-queue marks have no end mark and are left out.", len(opened))
        return spans[True], spans[False]

    def get_python_trace_data(self) -> list:
        """The Python tracer's events from its record files: none in a profile vNPU wrote (its exporter
        puts the tracer's events into trace_view.json itself, docs/profiler.md). Decoding the record
        files of a profile taken on Ascend is not supported."""
        if any(name.startswith("torch.python_tracer") for name in self._file_names):
            raise NotImplementedError(
                "FwkFileParser.get_python_trace_data: decoding the Python tracer's record files of a profile "
                "taken by real torch_npu is not supported on vNPU.")
        return []

    def get_gc_record_trace_data(self) -> list:
        return [TraceEventManager.create_x_event(record, "GC") for record in
                self.get_file_data_by_tag(FwkFileTag.GC_RECORD)]

    # --- trace_view.json ---------------------------------------------------------------------------
    def get_fwk_trace_data(self, torch_op_data=None, enqueue_data=None, dequeue_data=None) -> list:
        """The host's part of the timeline: torch ops, task-queue spans with the arrow from each
        enqueue to its dequeue, Python calls, GCs, and the names of the processes and threads."""
        activities = ProfilerConfig().activities
        if activities and Constant.CPU_ACTIVITIES not in activities:
            return []  # a device-only profile has no host events
        if torch_op_data is None:
            torch_op_data = self.get_file_data_by_tag(FwkFileTag.TORCH_OP)
        if enqueue_data is None or dequeue_data is None:
            enqueue_data, dequeue_data = self.get_task_queue_data()
        threads = defaultdict(dict)  # pid -> {tid: None}, in order of appearance
        events = []
        for op in torch_op_data:
            events.append(TraceEventManager.create_x_event(op, "cpu_op"))
            threads[op.pid][op.tid] = None
        for phase, cat, marks in (("s", "enqueue", enqueue_data), ("f", "dequeue", dequeue_data)):
            for mark in marks:
                events.append(TraceEventManager.create_x_event(mark, cat))
                events.append(TraceEventManager.create_task_queue_flow(phase, mark))
                threads[mark.pid][mark.tid] = None
        events.extend(self.get_python_trace_data())
        events.extend(self.get_gc_record_trace_data())
        for pid, tids in threads.items():
            events.extend(TraceEventManager.create_m_event(pid, dict.fromkeys(sorted(tids))))
        return events

    # --- export_type "db" -------------------------------------------------------------------------
    def get_fwk_api(self, torch_op_data=None, enqueue_data=None, dequeue_data=None) -> dict:
        """Rows of the framework's apis ([start ns, end ns, global tid, connection id, name id,
        sequence number, forward thread id, input dims id, input shapes id, call chain id, api type])
        grouped by kind; the managers that numbered the text are kept on the parser."""
        if torch_op_data is None:
            torch_op_data = self.get_file_data_by_tag(FwkFileTag.TORCH_OP)
        if enqueue_data is None or dequeue_data is None:
            enqueue_data, dequeue_data = self.get_task_queue_data()
        self.str_ids, self.connection_ids, self.callchain_ids = \
            Str2IdManager(), ConnectionIdManager(), CallChainIdManager()
        rows = {Constant.TORCH_OP_DATA: [], Constant.ENQUEUE_DATA: [], Constant.DEQUEUE_DATA: [],
                Constant.PYTHON_TRACE_DATA: [], Constant.MSTX_OP_DATA: []}
        for op in torch_op_data:
            args = op.args or {}
            row = [None] * (TorchOpDataOri.CALL_STACK + 1)
            row[TorchOpDataOri.START_NS] = op.ts
            row[TorchOpDataOri.END_NS] = op.end_ns
            row[TorchOpDataOri.GLOBAL_TID] = contact_2num(op.pid, op.tid)
            row[TorchOpDataOri.CONNECTION_ID] = []
            row[TorchOpDataOri.NAME] = self.str_ids.get_id_from_str(op.name)
            row[TorchOpDataOri.SEQUENCE_NUM] = args.get(Constant.SEQUENCE_NUMBER)
            row[TorchOpDataOri.FWD_THREAD_ID] = args.get(Constant.FORWARD_THREAD_ID)
            row[TorchOpDataOri.INPUT_DIMS] = self.str_ids.get_id_from_str(args.get(Constant.INPUT_DTYPES, ""))
            row[TorchOpDataOri.INPUT_SHAPES] = self.str_ids.get_id_from_str(args.get(Constant.INPUT_SHAPES, ""))
            row[TorchOpDataOri.CALL_STACK] = self.callchain_ids.get_callchain_id_from_callstack(
                args.get(Constant.CALL_STACK, ""))
            rows[Constant.TORCH_OP_DATA].append(row + [ApiType.TORCH_OP])
        for key, marks in ((Constant.ENQUEUE_DATA, enqueue_data), (Constant.DEQUEUE_DATA, dequeue_data)):
            for mark in marks:
                row = [None] * (TorchOpDataOri.CALL_STACK + 1)
                row[TorchOpDataOri.START_NS] = mark.ts
                row[TorchOpDataOri.END_NS] = mark.ts + mark.dur
                row[TorchOpDataOri.GLOBAL_TID] = contact_2num(mark.pid, mark.tid)
                row[TorchOpDataOri.CONNECTION_ID] = self.connection_ids.get_id_from_connection_ids([mark.corr_id])
                row[TorchOpDataOri.NAME] = self.str_ids.get_id_from_str(mark.origin_name)
                rows[key].append(row + [ApiType.TASK_QUEUE])
        rows[ID_MANAGERS] = (self.str_ids, self.connection_ids, self.callchain_ids)
        return rows
