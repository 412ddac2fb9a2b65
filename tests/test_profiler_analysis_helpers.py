"""The profile analysis's helpers (torch_npu/profiler/analysis/prof_common_func and prof_bean): the
decoders of the framework's binary records, the beans, interval arithmetic on a step's timeline,
the id managers of export_type "db", the op call tree, the trace's events, the task manager, what
msprof can export, which described features apply, the analysis log and the msprof check."""

import json
import logging
import os
import struct
import subprocess
import sys
from types import SimpleNamespace

import pytest

from torch_npu.profiler.analysis.prof_bean._gc_record_bean import GCRecordBean
from torch_npu.profiler.analysis.prof_bean._npu_mem_bean import NpuMemoryBean
from torch_npu.profiler.analysis.prof_bean._node_info_bean import NodeInfoBean
from torch_npu.profiler.analysis.prof_bean._op_mark_bean import OpMarkBean
from torch_npu.profiler.analysis.prof_bean._torch_op_bean import TorchOpBean
from torch_npu.profiler.analysis.prof_common_func import _cann_package_manager as cann_package
from torch_npu.profiler.analysis.prof_common_func._binary_decoder import BinaryDecoder
from torch_npu.profiler.analysis.prof_common_func._constant import (
    Constant, DbConstant, convert_ns2us_float, convert_ns2us_str, convert_us2ns,
)
from torch_npu.profiler.analysis.prof_common_func._feature_manager import FeatureManager
from torch_npu.profiler.analysis.prof_common_func._file_manager import FileManager
from torch_npu.profiler.analysis.prof_common_func._id_manager import (
    CallChainIdManager, ConnectionIdManager, Str2IdManager,
)
from torch_npu.profiler.analysis.prof_common_func._log import ProfilerLogger
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager
from torch_npu.profiler.analysis.prof_common_func._task_manager import (
    ConcurrentMode, ConcurrentTask, ConcurrentTasksManager, TaskStatus,
)
from torch_npu.profiler.analysis.prof_common_func._time_range_calculator import (
    CommunicationTimeRange, RangeCaculator,
)
from torch_npu.profiler.analysis.prof_common_func._tlv_decoder import TLVDecoder
from torch_npu.profiler.analysis.prof_common_func._trace_event_manager import TraceEventManager
from torch_npu.profiler.analysis.prof_common_func._tree_builder import TreeBuilder
from torch_npu.profiler.analysis.prof_common_func._utils import check_msprof_env


def _tlv_record(fixed: bytes, fields: dict, record_type=1) -> bytes:
    body = fixed + b"".join(struct.pack("<HI", tag, len(text.encode())) + text.encode()
                            for tag, text in fields.items())
    return struct.pack("<HI", record_type, len(body)) + body


def _op_range(start, end, tid, name, shapes=None):
    fixed = struct.pack("<3q4QB?", start, end, 7, 4242, tid, tid, 0, 1, False)
    fields = {1: name}
    if shapes:
        fields[3] = shapes
    return _tlv_record(fixed, fields)


# --- time units ------------------------------------------------------------------

def test_times_convert_exactly_between_ns_and_us():
    ns = 1_700_000_000_123_456_789  # beyond a float's 53 bits
    assert convert_ns2us_str(ns) == "1700000000123456.789"
    assert convert_us2ns(convert_ns2us_str(ns, "\t")) == ns
    assert convert_ns2us_str(-1500) == "-1.500"
    assert convert_ns2us_float(2500) == 2.5
    with pytest.raises(TypeError):
        convert_ns2us_str(1.5)


# --- decoders and beans ---------------------------------------------------------------

def test_tlv_decoder_reads_each_record_and_drops_a_truncated_tail():
    data = _op_range(100, 350, 11, "aten::add", "[[2, 3], [2, 3]]") + _op_range(400, 410, 12, "aten::relu")
    cut = _op_range(500, 600, 11, "aten::mul")[:-3]  # the writer was killed mid-record
    ops = TLVDecoder.decode(data + cut, TorchOpBean, struct.calcsize("<3q4QB?"))
    assert [op.name for op in ops] == ["aten::add", "aten::relu"]
    assert (ops[0].ts, ops[0].end_ns, ops[0].dur, ops[0].tid) == (100, 350, 250, 11)
    assert ops[0].args[Constant.INPUT_SHAPES] == "[[2, 3], [2, 3]]"
    assert Constant.INPUT_SHAPES not in ops[1].args and ops[1].args[Constant.SEQUENCE_NUMBER] == 7


def test_op_mark_names_its_side_of_the_queue():
    def mark(category):
        fixed = struct.pack("<q4Q", 1000 + category, category, 77, 5, 6)
        return TLVDecoder.decode(_tlv_record(fixed, {1: "MatMul"}), OpMarkBean, 40)[0]

    enqueue, dequeue = mark(0), mark(3)
    assert enqueue.name == "Enqueue@MatMul" and enqueue.is_enqueue_start and not enqueue.is_dequeue_end
    assert dequeue.name == "Dequeue@MatMul" and dequeue.is_dequeue_end and dequeue.ts == 1003
    dequeue.ts, dequeue.dur = 2000, 15
    assert (dequeue.ts, dequeue.dur) == (2000, 15)


def test_binary_decoder_cuts_fixed_size_records():
    data = struct.pack("<3Q", 9, 100, 160) + struct.pack("<3Q", 9, 200, 205) + b"\x01\x02"
    records = BinaryDecoder.decode(data, GCRecordBean, struct.calcsize(Constant.GC_RECORD_FORMAT))
    assert [(r.pid, r.ts, r.dur, r.name) for r in records] == [(9, 100, 60, "GC"), (9, 200, 5, "GC")]


# --- intervals ---------------------------------------------------------------------

def _spans(ranges):
    return [(r.start_ts, r.end_ts) for r in ranges]


def test_merging_joins_touching_and_nested_intervals():
    ranges = [RangeCaculator.generate_time_range(s, e) for s, e in [(40, 50), (0, 10), (10, 20), (2, 5), (30, 35)]]
    assert _spans(RangeCaculator.merge_continuous_intervals(ranges)) == [(0, 20), (30, 35), (40, 50)]
    assert RangeCaculator.merge_continuous_intervals([]) == []


def test_pipeline_overlap_splits_communication_around_computation():
    comm = [RangeCaculator.generate_time_range(s, e, CommunicationTimeRange) for s, e in [(0, 100), (150, 160)]]
    compute = [RangeCaculator.generate_time_range(s, e) for s, e in [(10, 20), (15, 30), (50, 60), (200, 210)]]
    pure, free = RangeCaculator.compute_pipeline_overlap(comm, compute)
    assert _spans(pure) == [(0, 10), (30, 50), (60, 100), (150, 160)]
    assert all(isinstance(r, CommunicationTimeRange) for r in pure)
    assert _spans(free) == [(100, 150), (160, 200)]


# --- ids of export_type "db" ----------------------------------------------------------------

def test_id_managers_number_each_value_once():
    strings = Str2IdManager(first_id=DbConstant.START_STRING_ID_FWK_API)
    first, second = strings.get_id_from_str("aten::mm"), strings.get_id_from_str("aten::add")
    assert first == DbConstant.START_STRING_ID_FWK_API and second == first + 1
    assert strings.get_id_from_str("aten::mm") == first
    assert strings.get_all_string_2_id_data() == [[first, "aten::mm"], [second, "aten::add"]]

    connections = ConnectionIdManager()
    assert connections.get_id_from_connection_ids([4, 5]) == 0
    assert connections.get_id_from_connection_ids([6]) == 1
    assert connections.get_id_from_connection_ids([4, 5]) == 0
    assert connections.get_connection_ids_from_id(1) == [6] and connections.get_connection_ids_from_id(9) == []

    stacks = CallChainIdManager()
    assert stacks.get_callchain_id_from_callstack("") == DbConstant.DB_INVALID_VALUE
    assert stacks.get_callchain_id_from_callstack("a.py(1): f;\r\nb.py(2): g") == 0
    assert stacks.get_all_callchain_id() == {0: ["a.py(1): f", "b.py(2): g"]}


# --- the op call tree -------------------------------------------------------------------

def _op(name, ts, end, tid=1):
    return SimpleNamespace(name=name, pid=1, tid=tid, ts=ts, end_ns=end, dur=end - ts, args={}, call_stack="",
                           is_torch_op=True)


def test_tree_nests_ops_and_credits_launches_to_the_innermost_op_of_their_thread():
    ops = [_op("inner", 20, 40), _op("outer", 0, 100), _op("later", 120, 130), _op("other_thread", 140, 150, tid=2)]
    launches = [SimpleNamespace(ts=30, tid=1, corr_id=501), SimpleNamespace(ts=50, tid=1, corr_id=502),
                SimpleNamespace(ts=145, tid=1, corr_id=503), SimpleNamespace(ts=146, tid=2, corr_id=504),
                SimpleNamespace(ts=110, tid=1, corr_id=505)]
    nodes = TreeBuilder.build_tree(ops, launches)
    by_name = {node.name: node for node in nodes[1:]}
    assert [node.name for node in nodes[1:]] == ["outer", "inner", "later", "other_thread"]
    assert by_name["inner"].parent_node is by_name["outer"] and by_name["later"].parent_node is nodes[0]
    assert by_name["outer"].host_self_dur == 100 - 20
    assert by_name["inner"].corr_id_self == [501] and by_name["inner"].corr_id_total == [501]
    assert by_name["outer"].corr_id_self == [502] and by_name["outer"].corr_id_total == [501, 502]
    assert by_name["other_thread"].corr_id_self == [504]  # 503 came from thread 1, which ran no op then
    assert all(not set(node.corr_id_self) & {503, 505} for node in nodes)
    assert TreeBuilder.match_self_torch_op(125, nodes[0]) is by_name["later"]
    assert TreeBuilder.match_self_torch_op(115, nodes[0]) is None


# --- trace events -----------------------------------------------------------------------

def test_trace_events_use_the_trace_units():
    op = _op("aten::mm", 1_500, 4_000)
    event = TraceEventManager.create_x_event(op, "cpu_op")
    assert (event["ts"], event["dur"], event["cat"]) == ("1.500", 2.5, "cpu_op")
    start, end = TraceEventManager.create_torch_to_npu_flow(op, _op("MatMul", 9_000, 9_500, tid=3))
    assert (start["ph"], end["ph"], start["id"], end["tid"]) == ("s", "f", 9_000, 3)
    assert TraceEventManager.create_fwd_flow({5: {"start": {"pid": 1, "tid": 1, "ts": 10}}}) == []


# --- files ------------------------------------------------------------------------------

def test_a_trace_written_in_pieces_is_one_json_array(tmp_path):
    part = tmp_path / "trace_view.json.tmp"
    final = tmp_path / "trace_view.json"
    FileManager.create_prepare_trace_json_by_path(str(part), [{"a": 1}])
    FileManager.append_trace_json_by_path(str(part), [{"b": 2}, {"c": 3}], str(final))
    assert json.loads(final.read_text()) == [{"a": 1}, {"b": 2}, {"c": 3}] and not part.exists()


def test_all_subdir_stops_at_the_depth_asked(tmp_path):
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "d").mkdir()
    found = ProfilerPathManager.get_all_subdir(str(tmp_path), max_depth=1)
    assert sorted(found) == sorted(str(tmp_path / p) for p in ("a", "a/b", "d"))
    assert len(ProfilerPathManager.get_all_subdir(str(tmp_path))) == 4


# --- the task manager -----------------------------------------------------------------------

class _Step(ConcurrentTask):
    def __init__(self, name, deps, mode, result=Constant.SUCCESS):
        super().__init__(name, deps, mode)
        self.result = result

    def run(self, user_input):
        return self.result, {"me": self.name, "got": sorted(user_input)}


def test_tasks_run_after_their_dependencies_in_every_mode():
    manager = ConcurrentTasksManager()
    manager.add_task(_Step("parse", [], ConcurrentMode.SUB_PROCESS))
    manager.add_task(_Step("view", ["parse"], ConcurrentMode.PTHREAD))
    manager.add_task(_Step("db", ["parse", "view"], ConcurrentMode.MAIN_PROCESS))
    manager.add_task(_Step("broken", [], ConcurrentMode.PTHREAD, result=Constant.FAIL))
    manager.add_task(_Step("after_broken", ["broken"], ConcurrentMode.SUB_PROCESS))
    manager.run()
    infos = manager.task_infos
    assert infos["db"].status == TaskStatus.Succeed and infos["db"].output == {"me": "db", "got": ["parse", "view"]}
    assert infos["view"].output == {"me": "view", "got": ["parse"]}
    assert infos["broken"].status == TaskStatus.Failed
    assert infos["after_broken"].status == TaskStatus.Failed and infos["after_broken"].start_time is None


# --- npu_mem.csv -> memory_record.csv ------------------------------------------------------------

def test_npu_memory_rows_keep_the_applications_totals_only():
    line = {"event": Constant.APP, "timestamp(us)": "17", "allocated(KB)": "2048", "memory(KB)": "4096",
            "Device_id": "3"}
    # Total Allocated keeps msprof's KB figure (as real torch_npu does); Total Reserved is in MB.
    assert NpuMemoryBean(line).row == [Constant.APP, "17", "2048", 4.0, "", "", "3"]
    assert NpuMemoryBean({**line, "event": Constant.PTA}).row == []
    assert NpuMemoryBean({"event": Constant.APP}).row == [Constant.APP, None, None, 0.0, "", "", None]


# --- what the CANN package can export ---------------------------------------------------------------

def _fake_msprof(folder, help_text, exit_code=0):
    folder.mkdir(exist_ok=True)
    msprof = folder / "msprof"
    msprof.write_text(f"#!/bin/sh\necho '{help_text}'\nexit {exit_code}\n")  # echo: PATH holds only msprof
    msprof.chmod(0o755)
    return msprof


def test_msprof_help_is_read_from_a_working_msprof_that_only_its_owner_may_write(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert not cann_package.check_msprof_help_output("")  # no msprof at all
    msprof = _fake_msprof(tmp_path / "bin", "--type <text|db>  default text: text(which will also export "
                                            "the database)")
    assert cann_package.check_cann_package_support_export_db()
    assert cann_package.check_cann_package_support_default_export_db()
    assert not cann_package.check_msprof_help_output("--no-such-option")
    msprof.chmod(0o775)  # group-writable: not run
    assert not cann_package.check_cann_package_support_export_db()
    _fake_msprof(tmp_path / "bin", "--type <text|db>", exit_code=1)  # a failing msprof
    assert not cann_package.check_cann_package_support_export_db()


def test_cann_package_answers_are_asked_of_msprof_once(monkeypatch):
    asked = []
    monkeypatch.setattr(cann_package, "check_cann_package_support_export_db", lambda: asked.append(1) or False)
    monkeypatch.setattr(cann_package.CannPackageManager, "SUPPORT_EXPORT_DB", None)
    assert cann_package.CannPackageManager.is_support_export_db() is False
    assert cann_package.CannPackageManager.is_support_export_db() is False
    assert asked == [1] and cann_package.CannPackageManager.SUPPORT_EXPORT_DB is False


# --- described features -------------------------------------------------------------------------

def _feature(component, versions):
    return {Constant.AffectedComponent: component, Constant.AffectedComponentVersion: versions}


def test_a_feature_applies_when_it_names_torch_npu_in_every_or_this_version():
    import torch_npu
    features = FeatureManager()
    features.load_feature_info({
        "everywhere": _feature("PTA", "all"),
        "this_version": _feature("PTA", f"0.0.1, {torch_npu.__version__}"),
        "other_version": _feature("PTA", "0.0.1"),
        "other_component": _feature("MindSpore", "all"),
        "malformed": "PTA",
    })
    supported = [name for name in ("everywhere", "this_version", "other_version", "other_component", "malformed",
                                   "never_described") if features.is_supported_feature(name)]
    assert supported == ["everywhere", "this_version"]
    features.load_feature_info({"everywhere": _feature("MindSpore", "all")})  # described again: decided again
    assert not features.is_supported_feature("everywhere")
    features.clear()
    assert not features.is_supported_feature("this_version")
# --- an op's kernels ------------------------------------------------------------------------

def test_node_info_sums_kernel_time_and_spans_first_start_to_last_end():
    kernels = [SimpleNamespace(ts=1_000, dur=0.5, is_ai_core=True),
               SimpleNamespace(ts=900, dur="2.25", is_ai_core=False),  # msprof's csv gives text
               SimpleNamespace(ts=1_200, dur=0.125, is_ai_core=True)]
    node = NodeInfoBean(kernels)
    assert node.kernel_list is kernels
    assert node.device_dur == 2.875 and node.device_dur_with_ai_core == 0.625
    assert node.min_start == 900
    assert node.max_end == 900 + 2250  # the longest kernel ends last, though it started first
    with pytest.raises(ValueError):
        NodeInfoBean([]).min_start


# --- the analysis log and the environment ------------------------------------------------------

def test_analysis_log_is_per_process_and_reopened_by_each_init(tmp_path):
    ProfilerLogger.destroy()
    with pytest.raises(RuntimeError, match="ProfilerLogger.init"):
        ProfilerLogger.get_instance()
    try:
        ProfilerLogger.init(str(tmp_path / "first"))
        ProfilerLogger.get_instance().info("to the first profile")
        ProfilerLogger.init(str(tmp_path / "second"), custom_name="rank0")
        log = ProfilerLogger.get_instance()
        assert len(log.handlers) == 1 and not log.propagate
        ProfilerLogger.set_level(logging.DEBUG)
        assert log.level == logging.DEBUG and log.handlers[0].level == logging.DEBUG
        log.debug("to the second profile")
    finally:
        ProfilerLogger.destroy()
    first = (tmp_path / "first" / "logs" / f"profiler_{os.getpid()}.log").read_text()
    second = (tmp_path / "second" / "logs" / f"profiler_rank0_{os.getpid()}.log").read_text()
    assert "[INFO]" in first and "to the first profile" in first and "second" not in first
    assert "[DEBUG]" in second and "to the second profile" in second
    with pytest.raises(RuntimeError):
        ProfilerLogger.get_instance()


def test_msprof_check_is_answered_once_until_reset(monkeypatch, capsys):
    def reset():
        for name in ("_called", "_cached_result"):
            if hasattr(check_msprof_env, name):
                delattr(check_msprof_env, name)

    reset()
    monkeypatch.delenv(Constant.MSPROF_STATIC_ENV, raising=False)
    monkeypatch.setenv(Constant.MSPROF_DYNAMIC_ENV, "1")
    try:
        assert check_msprof_env() is False
        assert "torch_npu's profiler is disabled" in capsys.readouterr().out
        monkeypatch.delenv(Constant.MSPROF_DYNAMIC_ENV)
        assert check_msprof_env() is False  # the first answer stands
        reset()
        assert check_msprof_env() is True
    finally:
        reset()


# --- import cost ------------------------------------------------------------------------------

def test_import_torch_npu_leaves_the_analysis_helpers_unloaded():
    code = ("import sys, torch_npu; print(sorted(m for m in sys.modules if "
            "m.startswith('torch_npu.profiler.analysis.prof_bean') or m.endswith(('_task_manager', "
            "'_tree_builder', '_tlv_decoder', '_trace_event_manager', '_log'))"
            " and m.startswith('torch_npu.profiler')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
