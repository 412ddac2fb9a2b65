"""export_type "db" (torch_npu/profiler/analysis/_db_export.py): the databases of a profile, checked
against the text export of the same profile (the same kernels, ops, durations, memory and steps), their
links (a task to its launch and its op), and torch_npu's DbManager contract."""

import collections
import csv
import sqlite3
from unittest import mock

import pytest
import torch
import torch_npu  # noqa: F401
import torch_npu.profiler as npu_profiler
from torch_npu.profiler import analysis
from torch_npu.profiler.analysis.prof_common_func._cann_package_manager import CannPackageManager
from torch_npu.profiler.analysis.prof_common_func._db_manager import BasicDb, DbManager, EmptyClass, TorchDb

NPU_ACTIVITIES = [npu_profiler.ProfilerActivity.CPU, npu_profiler.ProfilerActivity.NPU]


@pytest.fixture(autouse=True)
def _no_rank(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _train(out, export_type=("text", "db"), activities=NPU_ACTIVITIES, steps=2):
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 64, device="npu")
    torch.npu.synchronize()  # the set-up's tasks end before the profile
    schedule = npu_profiler.schedule(wait=0, warmup=0, active=steps, repeat=1)
    with npu_profiler.profile(activities=activities, schedule=schedule,
                              on_trace_ready=npu_profiler.tensorboard_trace_handler(str(out)), record_shapes=True,
                              profile_memory=True, with_stack=True,
                              experimental_config=npu_profiler._ExperimentalConfig(
                                  export_type=list(export_type))) as prof:
        for _ in range(steps):
            model(x).square().mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            torch.npu.synchronize()
            prof.step()
    (folder,) = list(out.glob("*_ascend_pt"))
    return folder, folder / analysis.OUTPUT_DIR


def _query(db, sql):
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def _tables(db):
    return {name for (name,) in _query(db, "SELECT name FROM sqlite_master WHERE type='table'")}


@pytest.fixture(scope="module")
def text_and_db(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("profile"))


def test_db_is_supported_and_both_exports_are_written(text_and_db):
    assert CannPackageManager.is_support_export_db() and not CannPackageManager.is_support_default_export_db()
    _, out = text_and_db
    for name in ("kernel_details.csv", "operator_details.csv", "ascend_pytorch_profiler.db", "analysis.db"):
        assert (out / name).is_file(), name
    assert {"STRING_IDS", "ENUM_API_TYPE", "CANN_API", "TASK", "COMPUTE_TASK_INFO", "PYTORCH_API", "CONNECTION_IDS",
            "PYTORCH_CALLCHAINS", "MEMORY_RECORD", "OP_MEMORY", "STEP_TIME", "SESSION_TIME_INFO", "NPU_INFO",
            "RANK_DEVICE_MAP", "HOST_INFO", "META_DATA"} <= _tables(out / "ascend_pytorch_profiler.db")
    assert "StepTraceTime" in _tables(out / "analysis.db")


def test_tasks_are_the_kernels_of_kernel_details(text_and_db):
    _, out = text_and_db
    db = out / "ascend_pytorch_profiler.db"
    tasks = _query(db, """
        SELECT name.value, type.value, core.value, TASK.streamId, TASK.taskId, TASK.startNs, TASK.endNs,
               shapes.value, dtypes.value
        FROM TASK JOIN COMPUTE_TASK_INFO info ON info.globalTaskId = TASK.globalTaskId
        JOIN STRING_IDS name ON name.id = info.name JOIN STRING_IDS type ON type.id = info.opType
        JOIN STRING_IDS core ON core.id = TASK.taskType
        LEFT JOIN STRING_IDS shapes ON shapes.id = info.inputShapes
        LEFT JOIN STRING_IDS dtypes ON dtypes.id = info.inputDataTypes
        ORDER BY TASK.globalTaskId""")
    kernels = _rows(out / "kernel_details.csv")
    assert len(tasks) == len(kernels) > 0
    for (name, op_type, core, stream, task_id, start, end, shapes, dtypes), kernel in zip(tasks, kernels):
        assert (name, op_type, core, stream, task_id) == (kernel["Name"], kernel["Type"], kernel["Accelerator Core"],
                                                          int(kernel["Stream ID"]), int(kernel["Task ID"]))
        assert (end - start) / 1000 == pytest.approx(float(kernel["Duration(us)"]), abs=0.002)
        assert start / 1000 == pytest.approx(float(kernel["Start Time(us)"]), abs=1)
        assert (shapes or "", dtypes or "") == (kernel["Input Shapes"], kernel["Input Data Types"])


def test_ops_are_those_of_operator_details(text_and_db):
    _, out = text_and_db
    api = _query(out / "ascend_pytorch_profiler.db", """
        SELECT s.value, CAST(endNs AS INTEGER) - CAST(startNs AS INTEGER) FROM PYTORCH_API
        JOIN STRING_IDS s ON s.id = PYTORCH_API.name WHERE PYTORCH_API.type = 50001""")
    durations = collections.defaultdict(list)
    for name, ns in api:
        durations[name].append(round(ns / 1000, 3))
    text = collections.defaultdict(list)
    for row in _rows(out / "operator_details.csv"):
        text[row["Name"]].append(float(row["Host Total Duration(us)"]))
    for name, totals in text.items():  # each host op of the text export, with the same durations
        assert sorted(totals) == pytest.approx(sorted(durations[name]), abs=0.002), name
    assert "ProfilerStep#0" in durations  # record_function ranges are framework ops too
    assert _query(out / "ascend_pytorch_profiler.db", "SELECT count(*) FROM PYTORCH_API WHERE type = 50003")[0][0] > 0


def test_each_task_links_to_its_launch_and_its_op(text_and_db):
    folder, out = text_and_db
    db = out / "ascend_pytorch_profiler.db"
    links = _query(db, """
        SELECT task_name.value, op_name.value, api_name.value, CANN_API.startNs, TASK.startNs
        FROM TASK JOIN COMPUTE_TASK_INFO info ON info.globalTaskId = TASK.globalTaskId
        JOIN STRING_IDS task_name ON task_name.id = info.name
        JOIN CANN_API ON CANN_API.connectionId = TASK.connectionId
        JOIN STRING_IDS api_name ON api_name.id = CANN_API.name
        JOIN CONNECTION_IDS ON CONNECTION_IDS.connectionId = TASK.connectionId
        JOIN PYTORCH_API ON PYTORCH_API.connectionId = CONNECTION_IDS.id
        JOIN STRING_IDS op_name ON op_name.id = PYTORCH_API.name""")
    assert len(links) == _query(db, "SELECT count(*) FROM TASK")[0][0]  # every task, exactly one op
    trace = analysis.Trace(analysis.read_trace(folder / analysis.RAW_TRACE))
    expected = sorted((t["name"], trace.launching_op(t)["name"]) for t in trace.tasks)
    assert sorted((task, op) for task, op, *_ in links) == expected
    assert all(api.startswith("aclrt") and launch <= start for _, _, api, launch, start in links)
    # forward and backward ops of a sequence number share a connection too
    assert _query(db, "SELECT count(*) FROM CONNECTION_IDS WHERE connectionId >= 1342177280")[0][0] > 0


def test_memory_tables_are_operator_memory_and_memory_record(text_and_db):
    _, out = text_and_db
    db = out / "ascend_pytorch_profiler.db"
    ops = _query(db, """SELECT s.value, size, duration, allocationTotalAllocated FROM OP_MEMORY
                        LEFT JOIN STRING_IDS s ON s.id = OP_MEMORY.name ORDER BY allocationTime, OP_MEMORY.rowid""")
    text = _rows(out / "operator_memory.csv")
    assert len(ops) == len(text) > 0
    for (name, size, duration, allocated), row in zip(ops, text):
        assert (name or "", size / 1024) == (row["Name"], pytest.approx(float(row["Size(KB)"]), abs=0.001))
        assert allocated / 1024 ** 2 == pytest.approx(float(row["Allocation Total Allocated(MB)"]), abs=1e-4)
        if row["Duration(us)"]:
            assert duration / 1000 == pytest.approx(float(row["Duration(us)"]), abs=0.002)
        else:
            assert duration is None
    records = _query(db, "SELECT totalAllocated, totalReserved FROM MEMORY_RECORD ORDER BY timestamp, rowid")
    assert [(round(a / 1024 ** 2, 4), round(r / 1024 ** 2, 4)) for a, r in records] == [
        (float(r["Total Allocated(MB)"]), float(r["Total Reserved(MB)"])) for r in _rows(out / "memory_record.csv")]


def test_steps_are_those_of_the_trace_and_step_trace_time(text_and_db):
    folder, out = text_and_db
    steps = _query(out / "ascend_pytorch_profiler.db", "SELECT id, endNs - startNs FROM STEP_TIME ORDER BY id")
    trace = analysis.Trace(analysis.read_trace(folder / analysis.RAW_TRACE))
    assert [(i, round(ns / 1000, 3)) for i, ns in steps] == [
        (int(s["name"].split("#")[1]), pytest.approx(s["dur"], abs=0.002)) for s in trace.steps]
    step_rows = _query(out / "analysis.db", "SELECT deviceId, step, computing, free, preparing FROM StepTraceTime")
    assert [(d, s, pytest.approx(c), pytest.approx(f), pytest.approx(p)) for d, s, c, f, p in step_rows] == [
        (int(r["Device_id"]), r["Step"], float(r["Computing"]), float(r["Free"]), float(r["Preparing"]))
        for r in _rows(out / "step_trace_time.csv")]


def test_db_only_writes_the_databases_and_text_can_follow(tmp_path):
    folder, out = _train(tmp_path, export_type=("db",), steps=1)
    assert sorted(p.name for p in out.iterdir()) == ["analysis.db", "ascend_pytorch_profiler.db"]
    npu_profiler.analyse(str(tmp_path), export_type="text")  # a new analysis, of the types asked now
    names = {p.name for p in out.iterdir()}
    assert "kernel_details.csv" in names and not {n for n in names if n.endswith(".db")}


def test_a_cpu_only_db_has_the_framework_tables_only(tmp_path):
    _, out = _train(tmp_path, export_type=("db",), activities=[npu_profiler.ProfilerActivity.CPU], steps=1)
    assert sorted(p.name for p in out.iterdir()) == ["ascend_pytorch_profiler.db"]
    tables = _tables(out / "ascend_pytorch_profiler.db")
    assert {"PYTORCH_API", "STRING_IDS", "ENUM_API_TYPE", "RANK_DEVICE_MAP"} <= tables
    assert not tables & {"TASK", "CANN_API", "COMPUTE_TASK_INFO", "SESSION_TIME_INFO", "NPU_INFO"}
    assert _query(out / "ascend_pytorch_profiler.db", "SELECT * FROM RANK_DEVICE_MAP") == [(-1, -1)]
    assert sorted(_query(out / "ascend_pytorch_profiler.db", "SELECT id FROM ENUM_API_TYPE")) == [
        (50001,), (50002,), (50003,), (50004,)]


def test_a_rank_names_its_database(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    _, out = _train(tmp_path, export_type=("db",), steps=1)
    db = out / "ascend_pytorch_profiler_3.db"
    assert db.is_file()
    assert _query(db, "SELECT rankId, deviceId FROM RANK_DEVICE_MAP") == [(3, torch.npu.current_device())]
    # torch_npu's singleton opens it as real torch_npu's tests do
    TorchDb().init(str(db))
    try:
        assert TorchDb().create_connect_db() and TorchDb().judge_table_exist("TASK")
        assert not TorchDb().judge_table_exist("NO_SUCH_TABLE")
    finally:
        TorchDb().close()


def test_db_manager_reports_failures_as_torch_npu_does(tmp_path, capsys):
    with mock.patch("sqlite3.connect", side_effect=sqlite3.Error("no db")):
        conn, curs = DbManager.create_connect_db(str(tmp_path / "x.db"))
    assert isinstance(conn, EmptyClass) and not conn and str(curs) == ""
    conn, curs = DbManager.create_connect_db(str(tmp_path / "x.db"))
    assert not DbManager.execute_sql(conn, "SELECT * FROM missing")
    assert "SQLite Error: no such table: missing" in capsys.readouterr().out
    assert DbManager.fetch_all_data(curs, "SELECT * FROM missing") == []
    with pytest.raises(RuntimeError, match="Failed to create table"):
        DbManager.create_table_with_headers(conn, curs, "T", [("a", "NOT A TYPE,")])
    DbManager.create_table_with_headers(conn, curs, "T", [("a", "INTEGER"), ("b", "TEXT")])
    DbManager.insert_data_into_table(conn, "T", [[i, str(i)] for i in range(25)])
    with mock.patch.object(DbManager, "FETCH_SIZE", 10):
        assert len(DbManager.fetch_all_data(curs, "SELECT * FROM T")) == 25
    DbManager.clear_table_data(conn, curs, "T")
    assert DbManager.fetch_one_data(curs, "SELECT count(*) FROM T") == (0,)
    DbManager.destroy_db_connect(conn, curs)
    DbManager.destroy_db_connect(None, None)
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(RuntimeError, match="not a file"):
        DbManager.create_connect_db(str(tmp_path / "dir.db"))


def test_basic_db_keeps_its_first_path_until_closed(tmp_path):
    db = BasicDb()
    db.init(str(tmp_path / "a.db"))
    db.init(str(tmp_path / "b.db"))  # ignored: a path is set
    assert db.get_db_path() == str(tmp_path / "a.db") and db.create_connect_db()
    db.create_table_with_headers("T", [("a", "INTEGER")])
    db.insert_data_into_table("T", [[1], [2]])
    assert db.judge_table_exist("T") and db.fetch_all_data("SELECT a FROM T") == [(1,), (2,)]
    db.clear_table_data("T")
    assert db.fetch_one_data("SELECT count(*) FROM T") == (0,)
    db.close()
    assert db.get_db_path() is None and db.conn is None
    db.init(str(tmp_path / "b.db"))
    assert db.get_db_path() == str(tmp_path / "b.db")
