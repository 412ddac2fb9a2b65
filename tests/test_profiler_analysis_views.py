"""The profile analysis's steps (torch_npu/profiler/analysis/prof_parse, prof_view, _profiler_config):
reading msprof's exports, having msprof export them, linking host launches to device tasks, the
framework's records and api rows, the views they write (the trace's paths and pruning), the event
tree and the memory timeline on torch's memory profiler, msprof's own analysis and the db's
description of the run."""

import json
import logging
import os
import sqlite3
import stat
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from torch_npu.profiler.analysis._profiler_config import ProfilerConfig
from torch_npu.profiler.analysis.prof_common_func._constant import ApiType, Constant, TorchOpDataOri
from torch_npu.profiler.analysis.prof_common_func._csv_headers import CsvHeaders
from torch_npu.profiler.analysis.prof_common_func._db_manager import TorchDb
from torch_npu.profiler.analysis.prof_common_func._log import ProfilerLogger
from torch_npu.profiler.analysis.prof_parse._cann_file_parser import CANNDataEnum, CANNFileParser
from torch_npu.profiler.analysis.prof_parse._event_tree_parser import (
    _EventType, _ProfilerEvent, build_event_tree, parse_input_from_string, parse_tensor_metadata,
)
from torch_npu.profiler.analysis.prof_parse._fwk_cann_relation_parser import FwkCANNRelationParser
from torch_npu.profiler.analysis.prof_parse._fwk_file_parser import FwkFileParser
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser
from torch_npu.profiler.analysis.prof_view._communication_parser import CommunicationParser
from torch_npu.profiler.analysis.prof_view._kernel_view_parser import KernelViewParser
from torch_npu.profiler.analysis.prof_view._memory_timeline_parser import (
    Action, Category, DeviceKey, MemoryProfileTimeline, Storage, TensorKey,
)
from torch_npu.profiler.analysis.prof_view._trace_step_time_parser import TraceStepTimeParser
from torch_npu.profiler.analysis.prof_view.cann_parse._cann_analyze import CANNAnalyzeParser
from torch_npu.profiler.analysis.prof_view.prof_db_parse._basic_db_parser import BasicDbParser
from torch_npu.profiler.analysis.prof_view._trace_view_parser import TraceViewParser
from torch_npu.profiler.analysis.prof_view.cann_parse import _cann_export
from torch_npu.profiler.analysis.prof_view.cann_parse._cann_export import CANNExportParser
from torch_npu.profiler.analysis.prof_view.prepare_parse._fwk_pre_parser import (
    DbPreParser, TaskQueueParser, TorchOpParser,
)
from torch_npu.profiler.analysis.prof_view.prof_db_parse._fwk_api_db_parser import FwkApiDbParser


def _cann_folder(tmp_path):
    cann = tmp_path / "PROF_000001_20260101000000000_ABCDEFGHIJ" / "mindstudio_profiler_output"
    cann.mkdir(parents=True)
    return cann


# --- msprof's exports ---------------------------------------------------------------------------

def test_cann_files_are_found_by_kind_and_flows_link_launches_to_tasks(tmp_path):
    cann = _cann_folder(tmp_path)
    trace = [
        {"cat": "HostToDevice", "ph": "s", "id": 7, "ts": "10.500", "pid": 1, "tid": 1},
        {"cat": "HostToDevice", "ph": "f", "id": 7, "ts": "20.000", "pid": 2, "tid": 3},
        {"ph": "X", "name": "MatMul", "pid": 2, "tid": 3, "ts": "20.000", "dur": 1.5},
        {"ph": "X", "name": "Unlinked", "pid": 2, "tid": 3, "ts": "30.000", "dur": 1},
    ]
    (cann / "msprof_20260101.json").write_text(json.dumps(trace))
    (cann / "op_summary_20260101.csv").write_text("Op Name\nMatMul\n")
    parser = CANNFileParser(str(tmp_path))
    assert len(parser.get_file_list_by_type(CANNDataEnum.OP_SUMMARY)) == 1
    linked = parser.get_acl_to_npu_data()
    assert list(linked) == [10500]
    (task,) = linked[10500]
    assert (task.name, task.ts, task.end_ns) == ("MatMul", 20000, 21500)


def test_cann_json_readers_reject_broken_json():
    with pytest.raises(RuntimeError):
        CANNFileParser._json_load("[")
    assert CANNFileParser._json_dict_load("[1]") == {}


# --- config ---------------------------------------------------------------------------------------

def test_config_keeps_known_export_types_and_converts_syscnt():
    config = ProfilerConfig.__wrapped_class__()
    assert config._get_export_type_from_profiler_info({"export_type": ["db", "bogus"]}) == [Constant.Db]
    config._syscnt_enable, config._freq, config._start_cnt, config._time_offset = True, 50.0, 100, 1000
    assert config.get_timestamp_from_syscnt(150) == 1000 + 50 * 1000 / 50.0
    assert config.is_number(" 1e3 ") and not config.is_number("1e")


# --- framework records ----------------------------------------------------------------------------

def _op(name, start, end, pid=1, tid=2, args=None):
    return SimpleNamespace(name=name, ts=start, end_ns=end, dur=end - start, pid=pid, tid=tid, args=args or {})


def _mark(name, start, dur, corr_id, tid):
    return SimpleNamespace(name=name, origin_name=name, ts=start, dur=dur, corr_id=corr_id, pid=1, tid=tid,
                           args={})


def test_host_trace_has_ops_queue_spans_flows_and_thread_names(tmp_path, monkeypatch):
    monkeypatch.setattr(ProfilerConfig.__wrapped_class__, "activities", property(lambda self: []))
    parser = FwkFileParser(str(tmp_path))
    events = parser.get_fwk_trace_data([_op("aten::add", 1000, 3000)], [_mark("add", 1500, 100, 9, 2)],
                                       [_mark("add", 4000, 500, 9, 5)])
    phases = sorted(event["ph"] for event in events)
    assert phases.count("X") == 3 and phases.count("s") == 1 and phases.count("f") == 1
    thread_names = [event for event in events if event["name"] == "thread_name"]
    assert sorted(event["tid"] for event in thread_names) == [2, 5]


def test_fwk_api_rows_number_names_and_link_queue_items(tmp_path):
    parser = FwkFileParser(str(tmp_path))
    rows = parser.get_fwk_api([_op("aten::mm", 10, 20, args={Constant.SEQUENCE_NUMBER: 4})],
                              [_mark("mm", 12, 1, 77, 2)], [_mark("mm", 30, 5, 77, 3)])
    (op_row,) = rows[Constant.TORCH_OP_DATA]
    assert op_row[TorchOpDataOri.START_NS] == 10 and op_row[-1] == ApiType.TORCH_OP
    assert op_row[TorchOpDataOri.GLOBAL_TID] == (1 << 32) | 2
    (enqueue,) = rows[Constant.ENQUEUE_DATA]
    assert parser.connection_ids.get_connection_ids_from_id(enqueue[TorchOpDataOri.CONNECTION_ID]) == [77]


def test_launch_in_a_dequeue_goes_to_the_op_that_enqueued_it():
    parser = FwkApiDbParser("db", {"profiler_path": "unused"})
    queue_id = parser._connection_ids.get_id_from_connection_ids([5])
    op = [100, 200, 1, [], "op"]
    parser.get_torch_op_connection_ids_with_task_queue(
        [[120, 130, 1, queue_id, "enq"]], [[300, 400, 2, queue_id, "deq"]], [op], 1, [[350, 360, 2, 42]])
    assert op[TorchOpDataOri.CONNECTION_ID] == [42]


def test_first_steps_hand_records_on_and_fail_alone(tmp_path, monkeypatch):
    params = {"profiler_path": str(tmp_path), "output_path": str(tmp_path)}
    spans = ([_mark("mm", 12, 1, 77, 2)], [_mark("mm", 30, 5, 77, 3)])
    monkeypatch.setattr(FwkFileParser, "get_task_queue_data", lambda self: spans)
    monkeypatch.setattr(FwkFileParser, "get_file_data_by_tag",
                        lambda self, tag: [_op("aten::mm", 10, 20, args={Constant.SEQUENCE_NUMBER: 4})])
    queue = TaskQueueParser("queue", params).run({})
    ops = TorchOpParser("ops", params).run({})
    assert queue == (Constant.SUCCESS, {Constant.ENQUEUE_DATA: spans[0], Constant.DEQUEUE_DATA: spans[1]})
    status, rows = DbPreParser("db", params).run({Constant.TASK_QUEUE_PARSER: queue[1],
                                                  Constant.TORCH_OP_PARSER: ops[1]})
    assert status == Constant.SUCCESS
    assert len(rows[Constant.TORCH_OP_DATA]) == 1 and len(rows[Constant.ENQUEUE_DATA]) == 1

    def unreadable(self):
        raise OSError("truncated record")

    monkeypatch.setattr(FwkFileParser, "get_task_queue_data", unreadable)
    assert TaskQueueParser("queue", params).run({}) == (Constant.FAIL, None)
    status, rows = DbPreParser("db", params).run({Constant.TASK_QUEUE_PARSER: None})  # a failed step
    assert status == Constant.SUCCESS and rows[Constant.ENQUEUE_DATA] == []


def test_trace_view_paths_and_level0_pruning(monkeypatch):
    parser = TraceViewParser("trace", {"output_path": "/data/prof/ASCEND_PROFILER_OUTPUT"})
    assert parser._temp_trace_file_path == "/data/prof/ASCEND_PROFILER_OUTPUT/trace_view.json"
    assert parser._trace_file_path == "data/prof/ASCEND_PROFILER_OUTPUT/trace_view.json"
    assert TraceViewParser("trace", {"output_path": "out"})._trace_file_path == "out/trace_view.json"
    monkeypatch.setattr(ProfilerConfig(), "_profiler_level", Constant.LEVEL0)
    events = [{"ph": "X", "name": "aten::mm"}, {"ph": "X", "name": "Computing"},
              {"ph": "M", "name": "process_name", "args": {"name": "Overlap Analysis"}},
              {"ph": "M", "name": "process_name", "args": {"name": "Python"}}]
    assert TraceViewParser._prune_trace_by_level(events) == [events[0], events[3]]
    assert TraceViewParser._prune_trace_by_level([]) == []


class _ConfigLoads:
    """Stands in for ProfilerConfig, recording which profile it was asked to load."""
    loaded = []

    def load_info(self, path):
        self.loaded.append(path)


def _fake_msprof(folder, exit_code):
    # Writes its arguments where the test reads them, then exits as told.
    script = folder / "msprof"
    script.write_text(f"#!/bin/sh\necho \"$@\" > {folder / 'args'}\nexit {exit_code}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.mark.parametrize("export_type,exit_code", [([Constant.Db], 0), ([Constant.Text], 0), ([Constant.Db], 3)])
def test_cann_export_runs_msprof_over_the_cann_folder(tmp_path, monkeypatch, export_type, exit_code):
    cann = _cann_folder(tmp_path).parent
    tools = tmp_path / "bin"
    tools.mkdir()
    _fake_msprof(tools, exit_code)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(_cann_export, "ProfilerConfig", _ConfigLoads)
    parser = CANNExportParser("export", {"profiler_path": str(tmp_path), Constant.EXPORT_TYPE: export_type})
    status = parser.run({})
    assert status == ((Constant.SUCCESS if exit_code == 0 else Constant.FAIL), None)
    assert _ConfigLoads.loaded[-1] == str(tmp_path)
    flags = f"--export=on --output={cann}" + (" --type=db" if export_type == [Constant.Db] else "")
    assert (tools / "args").read_text().strip() == flags


def test_cann_export_without_cann_data_or_without_msprof(tmp_path, monkeypatch):
    monkeypatch.setattr(_cann_export, "ProfilerConfig", _ConfigLoads)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert CANNExportParser("export", {"profiler_path": str(tmp_path)}).run({}) == (Constant.SUCCESS, None)
    _cann_folder(tmp_path)
    parser = CANNExportParser("export", {"profiler_path": str(tmp_path)})
    assert parser.msprof_path == "" and parser.run({}) == (Constant.FAIL, None)


# --- relations and views --------------------------------------------------------------------------

def test_launches_are_grouped_under_the_dequeue_span_holding_them():
    spans = [SimpleNamespace(ts=100, dur=50, corr_id=1), SimpleNamespace(ts=200, dur=50, corr_id=2)]
    kernels = FwkCANNRelationParser.combine_kernel_dict({120: ["a"], 130: ["b"], 210: ["c"], 500: ["d"]}, spans)
    assert kernels == {1: ["a", "b"], 2: ["c"]}


def test_kernel_headers_keep_shapes_at_level0_and_rename_msprof_columns():
    headers = CsvHeaders.OP_SUMMARY_SHOW_HEADERS + ["Model ID", CsvHeaders.INPUT_SHAPES]
    kept = KernelViewParser._get_kernel_headers(headers, False)
    assert kept == CsvHeaders.OP_SUMMARY_SHOW_HEADERS + [CsvHeaders.INPUT_SHAPES]
    assert KernelViewParser._project_map_for_headers(kept)[:2] == ["Name", "Type"]


def test_communication_ops_split_by_kind_and_step():
    parser = CommunicationParser("comm", {"profiler_path": "unused"})
    groups = parser.split_communication_p2p_ops({"hcom_send_0": {}, "hcom_allGather_1": {}, "Total": {}})
    assert list(groups["p2p"]) == ["hcom_send_0"] and list(groups["collective"]) == ["hcom_allGather_1"]
    parser.step_list = [{"step_id": "1", "start_ts": 0, "end_ts": 1000}, {"step_id": "2", "start_ts": 1001,
                                                                       "end_ts": 5000}]
    parser.split_comm_op_by_step({"op": {"Communication Time Info": {"Start Timestamp(us)": 2}}})
    assert parser.step_list[1]["comm_ops"] == {"op": {"Communication Time Info": {"Start Timestamp(us)": 2}}}
    assert parser.compute_ratio(1, 3) == 0.3333


def test_step_times():
    steps = [[3, 0, 100, 10, 90, -1, -1]]
    assert TraceStepTimeParser.get_e2e_time(3, steps) == 80
    assert TraceStepTimeParser("s", {}).get_prepare_time(3, steps) == 10
    assert not TraceStepTimeParser.is_float_num(None)


# --- event tree and memory timeline -------------------------------------------------------------

def test_event_tree_nests_ops_per_thread():
    outer = _ProfilerEvent(_EventType.TorchOp, 1, 0, 100, "outer")
    inner = _ProfilerEvent(_EventType.TorchOp, 1, 10, 20, "inner")
    other = _ProfilerEvent(_EventType.TorchOp, 2, 15, 30, "other thread")
    later = _ProfilerEvent(_EventType.TorchOp, 1, 50, 60, "later")
    build_event_tree([outer, inner, other, later])
    assert outer.children == [inner, later] and other.parent is None
    assert all(event.finished for event in (outer, inner, other, later))


def test_tensor_metadata_parsing():
    meta = parse_tensor_metadata("0x10;0x20;float32;4;2,3;3,1;0")
    assert (meta.impl_ptr, meta.dtype, meta.sizes) == (16, torch.float32, [2, 3])
    assert parse_input_from_string("0x10;0x20;int64;8;1;1;0", None, "2.5", "TS-")[1:] == ["2.5", None]


def test_memory_timeline_goes_through_torchs_coalescing():
    key = TensorKey(20, 0, 1, Storage(0x100, 1))
    profile = SimpleNamespace(
        timeline=[(2000, Action.CREATE, (key, 0), 64), (5000, Action.DESTROY, (key, 0), 64)],
        _categories=SimpleNamespace(get=lambda k, v: Category.ACTIVATION if k == key else None))
    timeline = MemoryProfileTimeline(profile)
    assert timeline._parse_device_info("npu:0") == DeviceKey(20, 0)
    times, sizes = timeline._construct_timeline("npu:0")
    assert times == [2, 5]
    assert sum(sizes[0]) == 64 and sum(sizes[1]) == 0
    assert timeline._construct_timeline("cpu") == ([], [])


# --- the steps' common part, msprof's analysis, the run's description in the db ------------------

def test_a_step_keeps_its_paths_and_logs_before_the_analysis_log_is_opened(monkeypatch):
    monkeypatch.setattr(ProfilerLogger, "_instance", None)
    step = BaseParser("step", {"profiler_path": "/p", "output_path": "/o", "export_type": ["db"]})
    assert (step._name, step._profiler_path, step._output_path) == ("step", "/p", "/o")
    assert isinstance(step.logger, logging.Logger) and step.logger.name == ProfilerLogger.LOGGER_NAME
    assert step.run({}) == (Constant.SUCCESS, None)


def _recording_msprof(folder, exit_code=0):
    """An msprof that appends its arguments to calls.txt next to it."""
    folder.mkdir()
    msprof = folder / "msprof"
    msprof.write_text(f'#!/bin/sh\necho "$*" >> "{folder}/calls.txt"\nexit {exit_code}\n')
    msprof.chmod(0o755)
    return folder / "calls.txt"


@pytest.mark.parametrize("export_type, rank_id, types_run", [
    (["db"], -1, ["db"]),
    (["text"], 2, ["text"]),
    (["text"], -1, []),  # text's analysis is communication: none outside a job
    (["text", "db"], -1, ["db", "text"]),
])
def test_msprof_analyzes_the_cann_folder_per_export_type(tmp_path, monkeypatch, export_type, rank_id, types_run):
    calls = _recording_msprof(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(ProfilerConfig(), "_rank_id", rank_id)
    cann = _cann_folder(tmp_path).parent
    step = CANNAnalyzeParser("analyze", {"profiler_path": str(tmp_path), "export_type": export_type})
    assert step.run({}) == (Constant.SUCCESS, None)
    lines = calls.read_text().splitlines() if calls.exists() else []
    assert lines == [f"--analyze=on --type={kind} --output={cann}" for kind in types_run]


def test_msprof_analysis_failures_are_reported_and_a_missing_msprof_skips_it(tmp_path, monkeypatch, capsys):
    _cann_folder(tmp_path)
    params = {"profiler_path": str(tmp_path), "export_type": ["db"]}
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert CANNAnalyzeParser("analyze", params).run({}) == (Constant.SUCCESS, None)
    _recording_msprof(tmp_path / "bin", exit_code=3)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert CANNAnalyzeParser("analyze", params).run({}) == (Constant.SUCCESS, None)
    assert "exited with 3" in capsys.readouterr().out


def test_basic_db_tables_describe_the_run_and_find_msprofs_db(tmp_path, monkeypatch):
    monkeypatch.setattr(ProfilerLogger, "_instance", logging.getLogger(ProfilerLogger.LOGGER_NAME))
    monkeypatch.setattr(ProfilerConfig(), "_rank_id", 1)
    export = _cann_folder(tmp_path)
    (export.parent / "device_4").mkdir()
    (export / "msprof_20260101000000.db").write_bytes(b"")
    (tmp_path / Constant.PROFILER_META_DATA).write_text(json.dumps({"model": "llama", "layers": 2}))
    step = BasicDbParser("basic", {"profiler_path": str(tmp_path), "output_path": str(tmp_path)})
    try:
        assert step.run({}) == (Constant.SUCCESS, str(export / "msprof_20260101000000.db"))
    finally:
        TorchDb().close()
    with sqlite3.connect(tmp_path / "ascend_pytorch_profiler_1.db") as db:
        assert db.execute("SELECT rankId, deviceId FROM RANK_DEVICE_MAP").fetchall() == [(1, 4)]
        assert len(db.execute("SELECT * FROM HOST_INFO").fetchall()) == 1
        meta = dict(db.execute("SELECT name, value FROM META_DATA").fetchall())
    assert "ENV_VARIABLES" in meta and (meta["model"], meta["layers"]) == ("llama", "2")


# --- import cost ---------------------------------------------------------------------------------

def test_import_torch_npu_leaves_the_analysis_steps_unloaded():
    code = ("import sys, torch_npu; print(sorted(m for m in sys.modules if m.startswith(("
            "'torch_npu.profiler.analysis.prof_parse', 'torch_npu.profiler.analysis.prof_view', "
            "'torch_npu.profiler.analysis._profiler_config'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
