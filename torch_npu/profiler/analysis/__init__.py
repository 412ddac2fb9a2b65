"""From a profile's trace to torch_npu's ASCEND_PROFILER_OUTPUT files.

The input is the chrome trace torch.profiler exports (with the npu device
events of csrc/profiler), kept as the raw data of a ``*_ascend_pt`` folder
(``FRAMEWORK/torch.trace.json``), so the offline ``analyse(path)`` and the
handler at the end of a profile run the same code. Every file is written to
a temporary name and renamed, so a process killed mid-write leaves whole
files only.
"""

import csv
import io
import json
import os
import pathlib
import struct
from collections import defaultdict as _defaultdict

from torch_npu.profiler.analysis.prof_common_func._file_manager import write_atomically as _write_atomically
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager as _ProfilerPathManager

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
RAW_TRACE = os.path.join("FRAMEWORK", "torch.trace.json")
MODEL_ID = 4294967295  # torch_npu's "no model" id
PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1, the "Device Type" of npu memory events

KERNEL_COLUMNS = ["Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State",
                  "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Num",
                  "Mix Block Num", "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats",
                  "Output Shapes", "Output Data Types", "Output Formats",
                  # vNPU's: the cost model's estimate for the profile's chip (needs record_shapes)
                  "Estimated Duration(us)", "Estimated Bound"]
OP_STATISTIC_COLUMNS = ["OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                        "Max Time(us)", "Ratio(%)", "Estimated Total Time(us)"]
OPERATOR_COLUMNS = ["Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
                    "Device Self Duration(us)", "Device Total Duration(us)",
                    "Device Self Duration With AICore(us)", "Device Total Duration With AICore(us)"]
STEP_COLUMNS = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication",
                "Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
OPERATOR_MEMORY_COLUMNS = ["Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
                           "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
                           "Allocation Total Reserved(MB)", "Allocation Total Active(MB)",
                           "Release Total Allocated(MB)", "Release Total Reserved(MB)", "Release Total Active(MB)",
                           "Stream Ptr", "Device Type"]
MEMORY_RECORD_COLUMNS = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                         "Total Active(MB)", "Stream Ptr", "Device Type"]
MB = 1024 * 1024


# --- writing ------------------------------------------------------------------

def _csv_text(columns, rows):
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(columns)
    writer.writerows(rows)
    return buf.getvalue()


def _us(value):
    return round(float(value), 3)


# --- reading the trace ----------------------------------------------------------

class Trace:
    """The events of one chrome trace that the analysis needs."""

    def __init__(self, trace, chip=None):
        from torch_npu.tools.cost_model import roofline
        self.roofline = roofline(chip) if chip else None
        events = trace.get("traceEvents", [])
        self.base_us = trace.get("baseTimeNanoseconds", 0) / 1000.0
        self.cpu_ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
        self.tasks = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                            key=lambda e: e["ts"])
        self.steps = sorted((e for e in events if e.get("cat") == "user_annotation"
                             and str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
        self.memory = sorted((e for e in events if e.get("name") == "[memory]"
                              and e.get("args", {}).get("Device Type") == PRIVATEUSE1), key=lambda e: e["ts"])
        self.op_by_external_id = {}
        for op in self.cpu_ops:
            ext = op.get("args", {}).get("External id")
            if ext is not None:
                self.op_by_external_id[ext] = op

    def launching_op(self, task):
        return self.op_by_external_id.get(task.get("args", {}).get("External id"))

    def estimate(self, task):
        """The cost model's estimate of a task, from its op's recorded inputs (None without)."""
        if self.roofline is None or is_communication(task):
            return None
        op = self.launching_op(task)
        args = (op or {}).get("args", {})
        dims, types = args.get("Input Dims"), args.get("Input type")
        if not dims or not types:
            return None
        from torch_npu.tools.cost_model import op_cost
        return op_cost(op["name"], dims, types, line=self.roofline)

    def step_of(self, ts):
        for step in self.steps:
            if step["ts"] <= ts <= step["ts"] + step["dur"]:
                return int(step["name"].split("#", 1)[1])
        return None

    def task_step(self, task):
        op = self.launching_op(task)
        return self.step_of(op["ts"] if op is not None else task["ts"])


def is_communication(task):
    return str(task.get("name", "")).startswith("hccl:")


def core_type(task):
    if is_communication(task):
        return "HCCL"
    if task.get("cat") == "gpu_memcpy" or task.get("args", {}).get("kind") == "copy":
        return "DMA"
    return "AI_CORE"


def block_num(task):
    """A kernel's Block Num: the threads its stage 2 computed with (its intra-op team, VNPU_HOST_CORES in
    the README), where CANN counts the AI cores a kernel ran on; 0 for tasks that report none."""
    return int(task.get("args", {}).get("block num", 0) or 0)


def op_type(trace, task):
    op = trace.launching_op(task)
    name = op["name"] if op is not None else task["name"]
    return name.split("::", 1)[-1]


def op_inputs(op):
    """An op's recorded inputs as kernel_details.csv writes them: (shapes, data types, formats),
    each ";"-separated ("" without record_shapes)."""
    dims = (op or {}).get("args", {}).get("Input Dims")
    if not dims:
        return "", "", ""
    types = (op or {}).get("args", {}).get("Input type", [""] * len(dims))
    shapes = ";".join(",".join(str(d) for d in shape) if isinstance(shape, list) else "" for shape in dims)
    dtypes = ";".join(str(t).upper() for t in types)
    formats = ";".join("ND" if isinstance(shape, list) and shape else "" for shape in dims)
    return shapes, dtypes, formats


# --- the files -------------------------------------------------------------------

def numbered_tasks(trace):
    """Each device task, in time order, as (task, device, stream, task id): the Task ID counts the
    tasks of each device's stream from 1, as kernel_details.csv, task_time.csv, the CANN raw data
    and the db's TASK table number them."""
    numbered, counts = [], _defaultdict(int)
    for task in trace.tasks:
        args = task.get("args", {})
        stream = int(args.get("stream", task.get("tid", 0)) or 0)
        device = int(args.get("device", task.get("pid", 0)) or 0)
        counts[(device, stream)] += 1
        numbered.append((task, device, stream, counts[(device, stream)]))
    return numbered


def kernel_details(trace):
    rows, last_end = [], {}
    for task, device, stream, task_id in numbered_tasks(trace):
        wait = max(0.0, task["ts"] - last_end.get((device, stream), task["ts"]))
        last_end[(device, stream)] = task["ts"] + task["dur"]
        shapes, dtypes, formats = op_inputs(trace.launching_op(task))
        step = trace.task_step(task)
        cost = trace.estimate(task)
        rows.append([step if step is not None else "", device, MODEL_ID, task_id, stream,
                     task["name"], op_type(trace, task), "dynamic", core_type(task),
                     _us(trace.base_us + task["ts"]), _us(task["dur"]), _us(wait), block_num(task), 0, "NO", shapes,
                     dtypes, formats, "N/A", "N/A", "N/A", _us(cost.seconds * 1e6) if cost else "",
                     cost.bound if cost else ""])
    if not trace.steps:
        columns = KERNEL_COLUMNS[1:]
        rows = [r[1:] for r in rows]
    else:
        columns = KERNEL_COLUMNS
    return columns, rows


TASK_TIME_COLUMNS = ["Device_id", "kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)",
                     "task_start(us)", "task_stop(us)"]


def task_time(trace):
    """msprof's task_time summary: every device task with its start, end and duration."""
    rows = []
    for task, device, stream, task_id in numbered_tasks(trace):
        start = trace.base_us + task["ts"]
        rows.append([device, task["name"], core_type(task), stream, task_id, _us(task["dur"]),
                     _us(start), _us(start + task["dur"])])
    return TASK_TIME_COLUMNS, rows


def op_statistic(trace):
    groups, estimates = _defaultdict(list), _defaultdict(list)
    for task in trace.tasks:
        key = (op_type(trace, task), core_type(task))
        groups[key].append(task["dur"])
        cost = trace.estimate(task)
        if cost is not None:
            estimates[key].append(cost.seconds * 1e6)
    total = sum(sum(v) for v in groups.values()) or 1.0
    rows = [[name, core, len(d), _us(sum(d)), _us(min(d)), _us(sum(d) / len(d)), _us(max(d)),
             round(100.0 * sum(d) / total, 2), _us(sum(estimates[(name, core)])) if estimates[(name, core)] else ""]
            for (name, core), d in groups.items()]
    rows.sort(key=lambda r: -r[3])
    return OP_STATISTIC_COLUMNS, rows


def _children(ops):
    """Direct children of each op: ops on the same thread nested in its span."""
    children = _defaultdict(list)
    by_thread = _defaultdict(list)
    for op in ops:
        by_thread[(op.get("pid"), op.get("tid"))].append(op)
    for thread_ops in by_thread.values():
        thread_ops.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for op in thread_ops:
            while stack and op["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            if stack:
                children[id(stack[-1])].append(op)
            stack.append(op)
    return children


def operator_details(trace):
    device_self = _defaultdict(float)
    for task in trace.tasks:
        op = trace.launching_op(task)
        if op is not None:
            device_self[id(op)] += task["dur"]
    children = _children(trace.cpu_ops)
    totals = {}

    def device_total(op):  # memoized: every op is asked, and asks its subtree
        if id(op) not in totals:
            totals[id(op)] = device_self[id(op)] + sum(device_total(c) for c in children[id(op)])
        return totals[id(op)]

    rows = []
    for op in trace.cpu_ops:
        host_self = op["dur"] - sum(c["dur"] for c in children[id(op)])
        shapes, _, _ = op_inputs(op)
        stack = op.get("args", {}).get("Call stack", "")
        total = device_total(op)
        rows.append([op["name"], shapes, stack, _us(host_self), _us(op["dur"]), _us(device_self[id(op)]),
                     _us(total), _us(device_self[id(op)]), _us(total)])
    return OPERATOR_COLUMNS, rows


def _union(intervals):
    total, end = 0.0, None
    merged = []
    for start, stop in sorted(intervals):
        if end is None or start > end:
            merged.append([start, stop])
            end = stop
        elif stop > end:
            merged[-1][1] = stop
            end = stop
    for start, stop in merged:
        total += stop - start
    return total, merged


def _intersection(a, b):
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def step_trace_time(trace):
    by_step = _defaultdict(list)
    for task in trace.tasks:
        step = trace.task_step(task) if trace.steps else ""
        if step is None:
            continue  # launched between the steps: in no step's time, as torch_npu counts a step's launches only
        by_step[step].append(task)
    windows = {int(s["name"].split("#", 1)[1]): s for s in trace.steps}
    rows = []
    for step in sorted(by_step, key=lambda s: (s == "", s)):
        tasks = by_step[step]
        devices = {int(t.get("args", {}).get("device", 0) or 0) for t in tasks} or {0}
        for device in sorted(devices):
            mine = [t for t in tasks if int(t.get("args", {}).get("device", 0) or 0) == device]
            compute_total, compute = _union([(t["ts"], t["ts"] + t["dur"]) for t in mine if not is_communication(t)])
            comm_total, comm = _union([(t["ts"], t["ts"] + t["dur"]) for t in mine if is_communication(t)])
            overlapped = _intersection(compute, comm)
            busy = compute_total + comm_total - overlapped
            first = min(t["ts"] for t in mine)
            last = max(t["ts"] + t["dur"] for t in mine)
            stage = last - first
            window = windows.get(step)
            preparing = max(0.0, first - window["ts"]) if window is not None else 0.0
            rows.append([device, step, _us(compute_total), _us(comm_total - overlapped), _us(overlapped),
                         _us(comm_total), _us(max(0.0, stage - busy)), _us(stage), 0, _us(comm_total - overlapped),
                         _us(preparing)])
    return STEP_COLUMNS, rows


def _innermost_ops(ops, events):
    """For each event (by id), the innermost op of its thread whose span holds
    it: one sweep per thread over ops and events in time order, keeping the
    stack of open ops (ops on a thread nest)."""
    ops_by_thread, events_by_thread = _defaultdict(list), _defaultdict(list)
    for op in ops:
        ops_by_thread[op.get("tid")].append(op)
    for event in events:
        events_by_thread[event.get("tid")].append(event)
    innermost = {}
    for tid, thread_events in events_by_thread.items():
        thread_ops = sorted(ops_by_thread.get(tid, ()), key=lambda e: (e["ts"], -e["dur"]))
        stack, next_op = [], 0
        for event in sorted(thread_events, key=lambda e: e["ts"]):
            while next_op < len(thread_ops) and thread_ops[next_op]["ts"] <= event["ts"]:
                op = thread_ops[next_op]
                while stack and stack[-1]["ts"] + stack[-1]["dur"] < op["ts"]:
                    stack.pop()
                stack.append(op)
                next_op += 1
            while stack and stack[-1]["ts"] + stack[-1]["dur"] < event["ts"]:
                stack.pop()
            innermost[id(event)] = stack[-1] if stack else None
    return innermost


def memory_timeline(trace):
    """The npu memory events, in the trace's units (us of the trace's clock, bytes):
    records, one per event: (ts, allocated, reserved, device); allocations, one per block
    allocated: dicts of name (the innermost op that allocated it), bytes, device, ts and the totals
    after the allocation, and, once freed within the profile, release_ts and the totals after it."""
    records, allocations, live = [], [], {}
    owners = _innermost_ops(trace.cpu_ops, [e for e in trace.memory if e["args"].get("Bytes", 0) > 0])
    for event in trace.memory:
        args = event["args"]
        device = int(args.get("Device Id", 0) or 0)
        allocated, reserved = args.get("Total Allocated", 0), args.get("Total Reserved", 0)
        records.append((event["ts"], allocated, reserved, device))
        if args.get("Bytes", 0) > 0:
            op = owners[id(event)]
            live[args.get("Addr")] = {"name": op["name"] if op else "", "bytes": args["Bytes"], "device": device,
                                      "ts": event["ts"], "allocated": allocated, "reserved": reserved}
        else:
            block = live.pop(args.get("Addr"), None)
            if block is not None:
                block.update(release_ts=event["ts"], release_allocated=allocated, release_reserved=reserved)
                allocations.append(block)
    allocations.extend(live.values())  # never released within the profile
    allocations.sort(key=lambda b: b["ts"])
    return records, allocations


def memory_files(trace):
    records, allocations = memory_timeline(trace)
    record_rows = [["PTA", _us(trace.base_us + ts), round(allocated / MB, 4), round(reserved / MB, 4),
                    round(allocated / MB, 4), "", f"NPU:{device}"] for ts, allocated, reserved, device in records]
    allocation_rows = []
    for block in allocations:
        start = _us(trace.base_us + block["ts"])
        row = [block["name"], round(block["bytes"] / 1024, 3), start, "", "", "", "",
               round(block["allocated"] / MB, 4), round(block["reserved"] / MB, 4), round(block["allocated"] / MB, 4),
               "", "", "", "", f"NPU:{block['device']}"]
        if "release_ts" in block:
            row[3] = row[4] = _us(trace.base_us + block["release_ts"])
            # from the trace's own times: the epoch ones, near 2**51 us, are only good to 0.25 us
            row[5] = row[6] = _us(block["release_ts"] - block["ts"])
            row[10] = row[12] = round(block["release_allocated"] / MB, 4)
            row[11] = round(block["release_reserved"] / MB, 4)
        allocation_rows.append(row)
    return (OPERATOR_MEMORY_COLUMNS, allocation_rows), (MEMORY_RECORD_COLUMNS, record_rows)


def collectives(trace):
    """The collectives (the hccl tasks) as (task, step key, op name): the step key is "step<N>"
    ("step" outside steps), the name hcom_<op>__<n>, n counting that op in its step from 1."""
    named, counts = [], _defaultdict(int)
    for task in trace.tasks:
        if not is_communication(task):
            continue
        step = trace.task_step(task)
        key = f"step{step}" if step is not None else "step"
        op = task["name"].split(":", 1)[1]
        counts[(key, op)] += 1
        named.append((task, key, f"hcom_{op}__{counts[(key, op)]}"))
    return named


def communication(trace):
    steps = _defaultdict(dict)
    for task, key, name in collectives(trace):
        elapse_ms = task["dur"] / 1000.0
        steps[key].setdefault("collective", {})[name] = {
            "Communication Time Info": {
                "Start Timestamp(us)": _us(trace.base_us + task["ts"]),
                "Elapse Time(ms)": round(elapse_ms, 6),
                "Transit Time(ms)": round(elapse_ms, 6),
                "Wait Time(ms)": 0,
                "Synchronization Time(ms)": 0,
                "Idle Time(ms)": 0,
                "Wait Time Ratio": 0,
                "Synchronization Time Ratio": 0,
            },
            "Communication Bandwidth Info": {},
        }
    return dict(steps)


def estimate_track(trace):
    """The cost model's estimates as trace events on a process of their own,
    each starting with its real task."""
    name = f"Estimated {trace.roofline.name}"
    events = [{"ph": "M", "name": "process_name", "pid": name, "tid": 0, "args": {"name": name}}]
    for task in trace.tasks:
        cost = trace.estimate(task)
        if cost is None:
            continue
        events.append({"ph": "X", "cat": "estimate", "name": task["name"], "pid": name,
                       "tid": task.get("args", {}).get("stream", 0), "ts": task["ts"], "dur": cost.seconds * 1e6,
                       "args": {"bound": cost.bound, "unit": cost.unit, "GFLOP": cost.flops / 1e9,
                                "MB": cost.bytes / 1e6, "measured_us": task["dur"]}})
    return events


GC_RECORD = os.path.join("FRAMEWORK", "torch.gc_record")


def gc_events(folder, info, base_us):
    """The garbage collections the profile recorded (_profiler_gc_detect.py) as
    "GC" events of the trace: their monotonic times are moved to the trace's
    clock by the pair of readings of both clocks in end_info."""
    path = pathlib.Path(folder) / GC_RECORD
    end = info.get("end_info", {})
    if not path.is_file() or "collectionTimeEnd" not in end or "MonotonicTimeEnd" not in end:
        return []
    record = struct.Struct("<3Q")  # Constant.GC_RECORD_FORMAT: pid, start, end
    data = path.read_bytes()
    offset_ns = end["collectionTimeEnd"] - end["MonotonicTimeEnd"]
    events = []
    for pid, start, stop in record.iter_unpack(data[:len(data) - len(data) % record.size]):
        events.append({"ph": "X", "cat": "GC", "name": "GC", "pid": pid, "tid": pid,
                       "ts": (start + offset_ns) / 1000.0 - base_us, "dur": (stop - start) / 1000.0, "args": {}})
    return events


def read_trace(path):
    """A chrome trace file's JSON. Kineto writes names as it finds them: with_stack's Python frames
    can hold control characters, which strict JSON refuses, and bytes that are not UTF-8 (torch's
    tracer names some frames from unset memory). Both are read as they are, the bytes as U+FFFD."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return json.load(f, strict=False)


class Profile:
    """One ``*_ascend_pt`` folder's data as the exports read it: ``raw`` (the chrome trace),
    ``info`` (profiler_info[_{rank}].json, {} without) and ``trace`` (its events, parsed)."""

    def __init__(self, folder):
        self.folder = pathlib.Path(folder)
        self.raw = read_trace(self.folder / RAW_TRACE)
        info_file = _ProfilerPathManager.get_info_file_path(str(self.folder))
        self.info = json.loads(pathlib.Path(info_file).read_text()) if info_file else {}
        self.trace = Trace(self.raw, chip=self.info.get("device_name"))

    def has_npu_activity(self):
        """Whether the device was profiled (a profile of torch's own, without profiler_info, counts)."""
        activities = self.info.get("config", {}).get("common_config", {}).get("activities")
        return activities is None or bool({"NPU", "ProfilerActivity.NPU"} & set(activities))


def write_outputs(folder, profile=None):
    """Writes ASCEND_PROFILER_OUTPUT/ of one ``*_ascend_pt`` folder from its raw trace (``profile``:
    the folder's Profile, when the caller has read it already)."""
    folder = pathlib.Path(folder)
    profile = profile or Profile(folder)
    raw, info, trace = profile.raw, profile.info, profile.trace
    out = folder / OUTPUT_DIR
    out.mkdir(exist_ok=True)
    view = dict(raw)
    extra = gc_events(folder, info, trace.base_us)
    if trace.roofline is not None:
        extra += estimate_track(trace)
    if extra:
        view["traceEvents"] = list(raw.get("traceEvents", [])) + extra
    _write_atomically(out / "trace_view.json", json.dumps(view))
    files = [("operator_details.csv", operator_details(trace)), ("step_trace_time.csv", step_trace_time(trace))]
    # The device's files come from its activity: a CPU-only profile has none, as on Ascend.
    if profile.has_npu_activity():
        files += [("kernel_details.csv", kernel_details(trace)), ("op_statistic.csv", op_statistic(trace)),
                  ("task_time.csv", task_time(trace))]
    for name, (columns, rows) in files:
        _write_atomically(out / name, _csv_text(columns, rows))
    if raw.get("profile_memory") or trace.memory:
        (op_columns, op_rows), (record_columns, record_rows) = memory_files(trace)
        _write_atomically(out / "operator_memory.csv", _csv_text(op_columns, op_rows))
        _write_atomically(out / "memory_record.csv", _csv_text(record_columns, record_rows))
    comm = communication(trace)
    if comm:
        _write_atomically(out / "communication.json", json.dumps(comm, indent=1))
    return out
