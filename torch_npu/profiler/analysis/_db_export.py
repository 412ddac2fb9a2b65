"""export_type "db": a profile as sqlite databases in ASCEND_PROFILER_OUTPUT/.

Real torch_npu writes two files, whose table and column names (TableColumnsManager in
prof_common_func/_constant.py) tools such as MindStudio Insight and msprof-analyze read:

- ``ascend_pytorch_profiler.db`` (``ascend_pytorch_profiler_{rank}.db`` on a rank): on Ascend, msprof's
  own database of the CANN raw data, taken over by torch_npu, which adds the framework's tables.
  - from the CANN raw data (a profile with ``ProfilerActivity.NPU``): CANN_API (each launch call),
    TASK (each device task), COMPUTE_TASK_INFO (each compute task's op, type and inputs),
    COMMUNICATION_OP (each collective), SESSION_TIME_INFO, NPU_INFO;
  - the framework's: PYTORCH_API (each host op, record_function range and, with with_stack, Python
    call), CONNECTION_IDS, PYTORCH_CALLCHAINS (with_stack), STEP_TIME, MEMORY_RECORD and OP_MEMORY
    (profile_memory), GC_RECORD (gc_detect_threshold), RANK_DEVICE_MAP, HOST_INFO, META_DATA;
  - STRING_IDS (every name, type and shape the other tables hold as an id) and ENUM_API_TYPE (the
    values of CANN_API.type and PYTORCH_API.type).
- ``analysis.db`` (a profile with the NPU activity): StepTraceTime (step_trace_time.csv's rows),
  CommAnalyzerTime, CommAnalyzerBandwidth and CommAnalyzerMatrix (with collectives).

Units as msprof's: times are unix-epoch nanoseconds, sizes bytes; StepTraceTime and CommAnalyzerTime
keep the text export's microseconds and milliseconds, as torch_npu's do. vNPU fills the tables from the
trace the text export reads (analysis.Trace), with the same rules, so each row agrees with its text
file: TASK and COMPUTE_TASK_INFO with kernel_details.csv, PYTORCH_API with operator_details.csv,
OP_MEMORY and MEMORY_RECORD with operator_memory.csv and memory_record.csv.

How the tables link (Note [db connection ids]): TASK.connectionId = CANN_API.connectionId, the Kineto
correlation of the call that launched the task (the CANN raw data's connectionId); an op that launched
tasks has PYTORCH_API.connectionId = CONNECTION_IDS.id, whose rows list those correlations. A forward
op and the backward op of its sequence number also share one connection id there, from
DbConstant.START_CONNECTION_ID_FWK_API up, as in torch_npu. String ids come from three ranges that
never collide: msprof's tables' from 0, the framework's from START_STRING_ID_FWK_API, the memory
tables' from START_STRING_ID_MEMORY (a string used by two writers has an id in each).

Each file is written under a temporary name and renamed, so a process killed mid-export leaves no
half-written database.
"""

import json
import os
import pathlib

from torch_npu.profiler import _cann_raw_data, analysis
from torch_npu.profiler.analysis.prof_common_func._constant import (
    ApiType, Constant, DbConstant, TableColumnsManager)
from torch_npu.profiler.analysis.prof_common_func._db_manager import BasicDb
from torch_npu.profiler.analysis.prof_common_func._host_info import collect_env_vars, get_host_info
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager

__all__ = []

_INVALID = DbConstant.DB_INVALID_VALUE
_SESSION_WITHOUT_END_NS = 30 * 60 * 10 ** 9  # msprof's end of a collection that never ended: start + 30 min


class StringIds:
    """One range of STRING_IDS: each distinct string gets the next id from ``start``."""

    def __init__(self, start):
        self._ids = {}
        self._next = start

    def id(self, value):
        """The id of ``value`` (DB_INVALID_VALUE for no string)."""
        if value is None or value == "":
            return _INVALID
        value = str(value)
        if value not in self._ids:
            self._ids[value] = self._next
            self._next += 1
        return self._ids[value]

    def rows(self):
        return [[i, value] for value, i in self._ids.items()]


def _int(value, default=0):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _global_tid(pid, tid):
    """msprof's globalTid: the pid in the high 32 bits, the thread id in the low 32."""
    return (_int(pid) & 0xFFFFFFFF) << 32 | (_int(tid) & 0xFFFFFFFF)


class _Clock:
    """The trace's times (us from its base) as unix-epoch ns."""

    def __init__(self, raw):
        self.base_ns = _int(raw.get("baseTimeNanoseconds", 0))

    def ns(self, ts):
        return self.base_ns + round(ts * 1000)


# --- msprof's tables ------------------------------------------------------------------------

def _launches(raw):
    return [e for e in raw.get("traceEvents", [])
            if str(e.get("cat", "")).lower() == "privateuse1_runtime" and e.get("ph") == "X"]


def cann_tables(profile, cann_path, strings):
    """msprof's tables of a profile with CANN raw data, their strings in ``strings``."""
    trace, clock = profile.trace, _Clock(profile.raw)
    launches = _launches(profile.raw)
    launch_pid = {e.get("args", {}).get("External id"): e.get("pid") for e in launches}
    cann_api = [[clock.ns(e["ts"]), clock.ns(e["ts"] + e.get("dur", 0)), ApiType.RUNTIME,
                 _global_tid(e.get("pid"), e.get("tid")), e.get("args", {}).get("External id"), strings.id(e["name"])]
                for e in launches]
    default_pid = next((op.get("pid") for op in trace.cpu_ops), 0)
    tasks, compute = [], []
    for global_id, (task, device, stream, task_id) in enumerate(analysis.numbered_tasks(trace)):
        connection = task.get("args", {}).get("External id")
        core = analysis.core_type(task)
        tasks.append([clock.ns(task["ts"]), clock.ns(task["ts"] + task["dur"]), device, connection, global_id,
                      _int(launch_pid.get(connection, default_pid)), strings.id(core), _INVALID, stream, task_id,
                      analysis.MODEL_ID])
        if not analysis.is_communication(task):
            shapes, dtypes, formats = analysis.op_inputs(trace.launching_op(task))
            compute.append([strings.id(task["name"]), global_id, 0, 0, strings.id(core),
                            strings.id(analysis.op_type(trace, task)), strings.id(formats), strings.id(dtypes),
                            strings.id(shapes), strings.id("N/A"), strings.id("N/A"), strings.id("N/A"), _INVALID,
                            strings.id("dynamic"), strings.id("NO")])
    communication = []
    for op_id, (task, _, name) in enumerate(analysis.collectives(trace)):
        op = task["name"].split(":", 1)[1]
        communication.append([strings.id(name), clock.ns(task["ts"]), clock.ns(task["ts"] + task["dur"]),
                              task.get("args", {}).get("External id"), _INVALID, op_id, 0, 0, None, _INVALID, None,
                              strings.id(f"hcom_{op}_"), _int(task.get("args", {}).get("device", 0))])
    records = _cann_raw_data.read(cann_path)
    start_ns = _int(records["start_info"].get("collectionTimeBegin")) * 1000
    end_us = records["end_info"].get("collectionTimeEnd")
    end_ns = _int(end_us) * 1000 if end_us is not None else start_ns + _SESSION_WITHOUT_END_NS
    npu_info = [[device, _chip_name(cann_path, device, profile.info)]
                for device in ProfilerPathManager.get_device_id(cann_path)]
    return {
        DbConstant.TABLE_CANN_API: cann_api,
        DbConstant.TABLE_TASK: tasks,
        DbConstant.TABLE_COMPUTE_TASK_INFO: compute,
        DbConstant.TABLE_COMMUNICATION_OP: communication,
        DbConstant.TABLE_SESSION_TIME_INFO: [[start_ns, end_ns]],
        DbConstant.TABLE_NPU_INFO: npu_info,
    }


def _chip_name(cann_path, device, info):
    path = os.path.join(cann_path, f"device_{device}", f"info.json.{device}")
    try:
        with open(path) as f:
            return json.load(f)["DeviceInfo"][0]["chip_name"]
    except (OSError, ValueError, KeyError, IndexError):
        return info.get("device_name", "")


# --- the framework's tables -------------------------------------------------------------------

_API_TYPES = {"cpu_op": ApiType.TORCH_OP, "user_annotation": ApiType.TORCH_OP, "python_function": ApiType.PYTHON_TRACE}


class _ConnectionIds:
    """CONNECTION_IDS: an id (from 0) per op, for the connections it takes part in."""

    def __init__(self):
        self.rows = []
        self._next = 0

    def id(self, connections):
        if not connections:
            return None
        connection_id = self._next
        self._next += 1
        self.rows.extend([connection_id, c] for c in connections)
        return connection_id


def _forward_backward_links(apis):
    """{index of an api: [its fwd-bwd connection]}: the last forward op of each sequence number (Fwd
    thread id 0) and the last backward op of it (Fwd thread id set) share a connection."""
    last = {}
    for index, event in apis:
        args = event.get("args", {})
        sequence = args.get("Sequence number")
        if not isinstance(sequence, int) or sequence < 0 or "Fwd thread id" not in args:
            continue
        side = "forward" if args["Fwd thread id"] == 0 else "backward"
        ends = last.setdefault(sequence, {})
        if side not in ends or ends[side][1] < event["ts"]:
            ends[side] = (index, event["ts"])
    links, connection = {}, DbConstant.START_CONNECTION_ID_FWK_API
    for ends in last.values():
        if "forward" in ends and "backward" in ends:
            for index, _ in ends.values():
                links.setdefault(index, []).append(connection)
            connection += 1
    return links


def framework_tables(profile, strings, has_cann_data):
    """PYTORCH_API, CONNECTION_IDS, PYTORCH_CALLCHAINS, STEP_TIME and GC_RECORD."""
    trace, clock, raw = profile.trace, _Clock(profile.raw), profile.raw
    launched = {e.get("args", {}).get("External id") for e in _launches(raw)} if has_cann_data else set()
    apis = [e for e in raw.get("traceEvents", []) if e.get("ph") == "X" and e.get("cat") in _API_TYPES]
    torch_ops = [(i, e) for i, e in enumerate(apis) if _API_TYPES[e["cat"]] == ApiType.TORCH_OP]
    links = _forward_backward_links(torch_ops)
    connections, callchains, callchain_rows = _ConnectionIds(), {}, []
    rows = []
    for index, event in enumerate(apis):
        args = event.get("args", {})
        api_type = _API_TYPES[event["cat"]]
        start = clock.ns(event["ts"])
        row = [start, start + round(event.get("dur", 0) * 1000), _global_tid(event.get("pid"), event.get("tid")),
               None, strings.id(event["name"]), None, None, None, None, None, api_type]
        if api_type == ApiType.TORCH_OP:
            external = args.get("External id")
            launches = [external] if external in launched else []
            row[3] = connections.id(launches + links.get(index, []))
            row[5] = args.get("Sequence number", -1)
            row[6] = args.get("Fwd thread id")
            shapes, dtypes, _ = analysis.op_inputs(event)
            row[7], row[8] = (strings.id(dtypes) if dtypes else None), (strings.id(shapes) if shapes else None)
            stack = args.get("Call stack")
            if stack:
                if stack not in callchains:
                    callchains[stack] = len(callchains)
                    frames = [f.strip() for f in stack.split(";") if f.strip()]
                    callchain_rows.extend([callchains[stack], strings.id(f), depth] for depth, f in enumerate(frames))
                row[9] = callchains[stack]
        rows.append(row)
    steps = [[_int(s["name"].split("#", 1)[1]), clock.ns(s["ts"]), clock.ns(s["ts"] + s["dur"])] for s in trace.steps]
    gc_rows = [[clock.ns(e["ts"]), clock.ns(e["ts"] + e["dur"]), _global_tid(e["pid"], e["tid"])]
               for e in analysis.gc_events(profile.folder, profile.info, trace.base_us)]
    return {
        DbConstant.TABLE_PYTORCH_API: rows,
        DbConstant.TABLE_CONNECTION_IDS: connections.rows,
        DbConstant.TABLE_PYTORCH_CALLCHAINS: callchain_rows,
        DbConstant.TABLE_STEP_TIME: steps,
        DbConstant.TABLE_GC_RECORD: gc_rows,
    }


def memory_tables(profile, strings):
    """MEMORY_RECORD and OP_MEMORY: the npu memory events (analysis.memory_timeline) in ns and bytes."""
    trace, clock = profile.trace, _Clock(profile.raw)
    if not (profile.raw.get("profile_memory") or trace.memory):
        return {}
    records, allocations = analysis.memory_timeline(trace)
    pta = strings.id(Constant.PTA)
    record_rows = [[pta, clock.ns(ts), allocated, reserved, allocated, None, device]
                   for ts, allocated, reserved, device in records]
    op_rows = []
    for block in allocations:
        start = clock.ns(block["ts"])
        end = clock.ns(block["release_ts"]) if "release_ts" in block else None
        duration = end - start if end is not None else None
        op_rows.append([strings.id(block["name"]), block["bytes"], start, end, end, duration, duration,
                        block["allocated"], block["reserved"], block["allocated"], block.get("release_allocated"),
                        block.get("release_reserved"), block.get("release_allocated"), None, block["device"]])
    return {DbConstant.TABLE_MEMORY_RECORD: record_rows, DbConstant.TABLE_OPERATOR_MEMORY: op_rows}


def _rank(info):
    rank = info.get(Constant.RANK_ID)
    return _int(rank, -1) if rank is not None else -1


def profile_info_tables(profile, cann_path):
    """RANK_DEVICE_MAP, HOST_INFO and META_DATA."""
    rank = _rank(profile.info)
    devices = ProfilerPathManager.get_device_id(cann_path) if cann_path else []
    host = get_host_info()
    meta = [["ENV_VARIABLES", json.dumps(collect_env_vars()["ENV_VARIABLES"])]]
    metadata_path = profile.folder / Constant.PROFILER_META_DATA
    try:
        metadata = json.loads(metadata_path.read_text()) if metadata_path.is_file() else {}
    except ValueError:
        metadata = {}
    meta += [[str(key), json.dumps(value)] for key, value in metadata.items()]
    return {
        DbConstant.TABLE_RANK_DEVICE_MAP: [[rank, device] for device in devices] or [[rank, Constant.INVALID_VALUE]],
        DbConstant.TABLE_HOST_INFO: [[host["host_uid"], host["host_name"]]],
        DbConstant.TABLE_META_DATA: meta,
    }


# --- analysis.db ----------------------------------------------------------------------------

def analysis_tables(profile):
    """StepTraceTime and, with collectives, the CommAnalyzer tables."""
    _, step_rows = analysis.step_trace_time(profile.trace)
    tables = {DbConstant.TABLE_STEP_TRACE_TIME: [[row[0], str(row[1]) if row[1] != "" else None] + row[2:]
                                                 for row in step_rows]}
    comm = analysis.communication(profile.trace)
    if comm:
        time_rows = []
        for step, kinds in comm.items():
            for kind, ops in kinds.items():
                for name, op in ops.items():
                    info = op["Communication Time Info"]
                    time_rows.append([name, "", info["Start Timestamp(us)"], info["Elapse Time(ms)"],
                                      info["Transit Time(ms)"], info["Wait Time(ms)"],
                                      info["Synchronization Time(ms)"], info["Idle Time(ms)"], step, kind])
        tables.update({DbConstant.TABLE_ANALYZER_TIME: time_rows, DbConstant.TABLE_ANALYZER_BANDWIDTH: [],
                       DbConstant.TABLE_ANALYZER_MATRIX: []})
    return tables


# --- writing --------------------------------------------------------------------------------

def _write_db(path, tables):
    """Writes ``tables`` ({name: rows}; every table listed is created, empty or not) to ``path``."""
    tmp = pathlib.Path(f"{path}.{os.getpid()}.tmp")
    for leftover in (tmp, pathlib.Path(f"{tmp}-journal")):
        leftover.unlink(missing_ok=True)
    db = BasicDb()
    db.init(str(tmp))
    if not db.create_connect_db():
        raise RuntimeError(f"Failed to connect to db file: {tmp}")
    try:
        for name, rows in tables.items():
            db.create_table_with_headers(name, TableColumnsManager.TableColumns[name])
            db.insert_data_into_table(name, rows)
    finally:
        db.close()
    os.chmod(tmp, 0o640)
    os.replace(tmp, path)


def export(folder, profile=None):
    """Writes the profile's databases into its ASCEND_PROFILER_OUTPUT/; returns their paths."""
    folder = pathlib.Path(folder)
    profile = profile or analysis.Profile(folder)
    out = folder / analysis.OUTPUT_DIR
    out.mkdir(exist_ok=True)
    cann_path = ProfilerPathManager.get_cann_path(str(folder))
    cann_strings = StringIds(0)
    fwk_strings = StringIds(DbConstant.START_STRING_ID_FWK_API)
    memory_strings = StringIds(DbConstant.START_STRING_ID_MEMORY)
    tables = {}
    if cann_path:
        tables.update(cann_tables(profile, cann_path, cann_strings))
    tables.update({name: rows for name, rows in framework_tables(profile, fwk_strings, bool(cann_path)).items()
                   if rows})
    tables.update({name: rows for name, rows in memory_tables(profile, memory_strings).items() if rows})
    tables.update(profile_info_tables(profile, cann_path))
    api_types = ApiType.NAMES if cann_path else {t: ApiType.NAMES[t] for t in ApiType.FRAMEWORK}
    tables[DbConstant.TABLE_ENUM_API_TYPE] = [[i, name] for i, name in api_types.items()]
    tables[DbConstant.TABLE_STRING_IDS] = cann_strings.rows() + fwk_strings.rows() + memory_strings.rows()
    rank = _rank(profile.info)
    name = (DbConstant.DB_ASCEND_PYTORCH_PROFILER if rank == -1 else f"ascend_pytorch_profiler_{rank}.db")
    written = [out / name]
    _write_db(written[0], tables)
    if cann_path:  # the step and communication analysis is of the device's activity
        written.append(out / DbConstant.DB_ANALYSIS)
        _write_db(written[1], analysis_tables(profile))
    return written
