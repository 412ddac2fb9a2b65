"""CANN's raw-data folder of a profile: ``PROF_<n>_<timestamp>_<id>/``.

Note [The CANN raw-data folder]
On Ascend, a profile that records the NPU activity also runs a collection of CANN's profiler,
msprof, on the current device (``aclprofStart`` at the start, ``aclprofStop`` at the stop). msprof
writes its raw data into a folder of the profile, ``PROF_{job:06d}_{YYYYmmddHHMMSSmmm}_{16
letters}/``: ``host/`` (what the host's CANN layers recorded: the API calls that launched the
device's work) and ``device_<id>/`` (the tasks the device ran), each with the collection's start and
end clocks. msprof's export, run by the analysis, adds ``mindstudio_profiler_output/`` and
``mindstudio_profiler_log/`` (kept only with ``data_simplification=False``). torch_npu's analysis
finds the folder by its name (``ProfilerPathManager.get_cann_path``); a CPU-only profile has none.

vNPU's device activity reaches the profiler through Kineto (csrc/profiler, docs/profiler.md), so the
collection here is made of the session's own records: the folder is made when a recording with
``ProfilerActivity.NPU`` starts, on the current device, and at the session's finalize the device
activities of its trace (``FRAMEWORK/torch.trace.json``) are written into it, in a layout of vNPU's
own, JSON lines whose times are unix-epoch nanoseconds (the trace's clock)::

    host/start_info, host/end_info          {"collectionDateBegin"/"End", "collectionTimeBegin"/"End" (us,
                                            wall clock), "clockMonotonicRaw" (ns)}
    host/info.json                          the host: hostname, pid, OS, cpuCores
    host/data/api_event.jsonl               each call that launched device work: name (aclrtLaunchKernel,
                                            ...), pid, tid, startNs, endNs, connectionId
    host/data/node_info.jsonl               the op each connection belongs to: connectionId, opName, opType,
                                            inputShapes, inputDataTypes, inputFormats
    device_<id>/start_info.<id>, end_info.<id>
    device_<id>/info.json.<id>              the device: id, chip name
    device_<id>/data/task_track.jsonl       each task the device ran, in time order: streamId, taskId (from 1
                                            in each stream), name, taskType (AI_CORE, DMA, HCCL), startNs,
                                            endNs, connectionId, blockNum (a kernel's threads)

``connectionId`` is the Kineto correlation of the launch: a task, its launch call and its op share it
(the db's TASK, CANN_API and CONNECTION_IDS tables link through it). The records are the trace's
device activities, numbered and typed by the analysis' own rules (analysis.numbered_tasks,
core_type), so they agree with kernel_details.csv task for task. A process killed before the
finalize leaves the folder with its start files only, as a killed msprof collection does.
"""

import datetime
import itertools
import json
import os
import platform
import random
import socket
import string
import time

from torch_npu.profiler import analysis
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager

__all__ = []

HOST_DIR = "host"
DATA_DIR = "data"
API_EVENT_FILE = "api_event.jsonl"
NODE_INFO_FILE = "node_info.jsonl"
TASK_TRACK_FILE = "task_track.jsonl"
_LAUNCH_CATEGORY = "privateuse1_runtime"  # Kineto's category of the launch activities (csrc/profiler)
_DIR_MODE = 0o750
_FILE_MODE = 0o640
_job_numbers = itertools.count(1)  # msprof numbers the collections of a process from 1


def _write(path, text):
    analysis._write_atomically(path, text, _FILE_MODE)


def _json_lines(records):
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)


def _clock(edge):
    """The start_info / end_info of a collection's ``edge`` ("Begin" or "End"): the wall clock and the
    monotonic clock read together."""
    now = datetime.datetime.now()
    clock = getattr(time, "CLOCK_MONOTONIC_RAW", time.CLOCK_MONOTONIC)
    return {f"collectionDate{edge}": now.strftime("%Y-%m-%d %H:%M:%S.%f"),
            f"collectionTime{edge}": time.time_ns() // 1000,
            "clockMonotonicRaw": time.clock_gettime_ns(clock)}


def _chip_name(device_id):
    try:
        import torch
        return torch.npu.get_device_name(device_id)
    except Exception:  # noqa: BLE001 - the chip's name is informative only
        return ""


class CannRawData:
    """One collection's folder: ``start`` makes it, ``finish`` writes the records of the recording."""

    def __init__(self, path):
        self.path = path

    @classmethod
    def start(cls, profile_dir, device_id):
        """Makes the collection's folder in ``profile_dir``, with the host's and ``device_id``'s start files."""
        stamp = datetime.datetime.now().strftime("%Y%m%d%H%M%S%f")[:-3]
        suffix = "".join(random.choices(string.ascii_uppercase, k=16))
        raw = cls(os.path.join(profile_dir, f"PROF_{next(_job_numbers):06d}_{stamp}_{suffix}"))
        host = os.path.join(raw.path, HOST_DIR)
        os.makedirs(os.path.join(host, DATA_DIR), mode=_DIR_MODE)
        _write(os.path.join(host, "start_info"), json.dumps(_clock("Begin")))
        _write(os.path.join(host, "info.json"), json.dumps({
            "hostname": socket.gethostname(), "pid": os.getpid(), "OS": platform.platform(),
            "cpuCores": os.cpu_count(), "platform": "vNPU"}))
        raw._device_dir(device_id)
        return raw

    def _device_dir(self, device_id):
        folder = os.path.join(self.path, f"device_{device_id}")
        if not os.path.isdir(folder):
            os.makedirs(os.path.join(folder, DATA_DIR), mode=_DIR_MODE)
            _write(os.path.join(folder, f"start_info.{device_id}"),
                   _read_json(os.path.join(self.path, HOST_DIR, "start_info")) or json.dumps(_clock("Begin")))
            _write(os.path.join(folder, f"info.json.{device_id}"), json.dumps({
                "DeviceInfo": [{"id": device_id, "chip_name": _chip_name(device_id)}], "platform": "vNPU"}))
        return folder

    def finish(self, trace_path):
        """Writes the device activities of the recording's raw trace and the end files."""
        raw = analysis.read_trace(trace_path)
        trace = analysis.Trace(raw)
        base_ns = int(raw.get("baseTimeNanoseconds", 0))

        def ns(ts):
            return base_ns + round(ts * 1000)

        launches = [e for e in raw.get("traceEvents", [])
                    if str(e.get("cat", "")).lower() == _LAUNCH_CATEGORY and e.get("ph") == "X"]
        api = [{"name": e["name"], "pid": e.get("pid"), "tid": e.get("tid"), "startNs": ns(e["ts"]),
                "endNs": ns(e["ts"] + e.get("dur", 0)), "connectionId": e.get("args", {}).get("External id")}
               for e in launches]
        nodes, tasks = {}, {}
        for task, device, stream, task_id in analysis.numbered_tasks(trace):
            connection = task.get("args", {}).get("External id")
            tasks.setdefault(device, []).append({
                "streamId": stream, "taskId": task_id, "name": task["name"], "taskType": analysis.core_type(task),
                "startNs": ns(task["ts"]), "endNs": ns(task["ts"] + task["dur"]), "connectionId": connection,
                "blockNum": analysis.block_num(task)})
            op = trace.launching_op(task)
            if op is not None and connection not in nodes:
                shapes, dtypes, formats = analysis.op_inputs(op)
                nodes[connection] = {"connectionId": connection, "opName": op["name"],
                                     "opType": analysis.op_type(trace, task), "inputShapes": shapes,
                                     "inputDataTypes": dtypes, "inputFormats": formats}
        host = os.path.join(self.path, HOST_DIR)
        _write(os.path.join(host, DATA_DIR, API_EVENT_FILE), _json_lines(api))
        _write(os.path.join(host, DATA_DIR, NODE_INFO_FILE), _json_lines(nodes.values()))
        end = json.dumps(_clock("End"))
        _write(os.path.join(host, "end_info"), end)
        for device in set(tasks) | set(ProfilerPathManager.get_device_id(self.path)):
            folder = self._device_dir(device)
            _write(os.path.join(folder, DATA_DIR, TASK_TRACK_FILE), _json_lines(tasks.get(device, [])))
            _write(os.path.join(folder, f"end_info.{device}"), end)


def _read_json(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _read_lines(path):
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read(cann_path):
    """The records of a collection's folder: {"start_info", "end_info" (dicts, {} when missing),
    "api_events", "node_info" (lists), "tasks" ({device id: [task, ...]})}."""
    host = os.path.join(cann_path, HOST_DIR)
    records = {}
    for name in ("start_info", "end_info"):
        text = _read_json(os.path.join(host, name))
        records[name] = json.loads(text) if text else {}
    records["api_events"] = _read_lines(os.path.join(host, DATA_DIR, API_EVENT_FILE))
    records["node_info"] = _read_lines(os.path.join(host, DATA_DIR, NODE_INFO_FILE))
    records["tasks"] = {device: _read_lines(os.path.join(cann_path, f"device_{device}", DATA_DIR, TASK_TRACK_FILE))
                        for device in ProfilerPathManager.get_device_id(cann_path)}
    return records
