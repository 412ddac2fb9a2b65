"""msprof's export of a CANN raw-data folder: ``PROF_*/mindstudio_profiler_output/`` and
``PROF_*/mindstudio_profiler_log/``.

On Ascend the analysis runs msprof's export on the profile's PROF_* folder, which writes msprof's own
summaries there, and then, as ``data_simplification`` (default True) asks, deletes them again, keeping
the raw data only. vNPU does the same from its raw data (Note [The CANN raw-data folder] in
_cann_raw_data.py), with msprof's file names and columns:

    mindstudio_profiler_output/op_summary_{YYYYmmddHHMMSS}.csv   each device task with its op (msprof's
                                                                 op summary, kernel_details.csv's source)
    mindstudio_profiler_output/task_time_{YYYYmmddHHMMSS}.csv    each device task: start, stop, duration
    mindstudio_profiler_log/msprof_export_{YYYYmmddHHMMSS}.log   what was exported from what

A previous export's folders are removed first, so the summaries are those of the last analysis, and
with ``data_simplification`` they are not written at all (the end state torch_npu leaves).
"""

import datetime
import os
import shutil

from torch_npu.profiler import _cann_raw_data
from torch_npu.profiler.analysis import MODEL_ID, TASK_TIME_COLUMNS, _csv_text
from torch_npu.profiler.analysis.prof_common_func._file_manager import write_atomically
from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager

__all__ = []

OP_SUMMARY_COLUMNS = ["Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State",
                      "Task Type", "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)", "Block Num",
                      "Mix Block Num", "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats",
                      "Output Shapes", "Output Data Types", "Output Formats", "Context ID"]


def _us(ns):
    return round(ns / 1000.0, 3)


def _summaries(records):
    """(op summary rows, task time rows) of a collection's records."""
    nodes = {n["connectionId"]: n for n in records["node_info"]}
    op_rows, time_rows = [], []
    for device, tasks in sorted(records["tasks"].items()):
        last_end = {}
        for task in tasks:
            stream = task["streamId"]
            wait = max(0, task["startNs"] - last_end.get(stream, task["startNs"]))
            last_end[stream] = task["endNs"]
            # a task whose op was not recorded (launched before the profile) is typed by its own name
            node = nodes.get(task["connectionId"]) or {"opType": task["name"].split("::", 1)[-1]}
            duration = task["endNs"] - task["startNs"]
            op_rows.append([device, MODEL_ID, task["taskId"], stream, task["name"],
                            node["opType"], "dynamic", task["taskType"], _us(task["startNs"]),
                            _us(duration), _us(wait), task.get("blockNum", 0), 0, "NO", node.get("inputShapes", ""),
                            node.get("inputDataTypes", ""), node.get("inputFormats", ""), "N/A", "N/A", "N/A",
                            "N/A"])
            time_rows.append([device, task["name"], task["taskType"], stream, task["taskId"], _us(duration),
                              _us(task["startNs"]), _us(task["endNs"])])
    return op_rows, time_rows


def export(profile_folder, data_simplification=True):
    """Runs the export on the profile's CANN raw-data folder, if it has one; returns the output folder
    written ('' when none was)."""
    cann_path = ProfilerPathManager.get_cann_path(str(profile_folder))
    if not cann_path:
        return ""
    output = os.path.join(cann_path, Constant.MINDSTUDIO_PROFILER_OUTPUT)
    log = os.path.join(cann_path, Constant.MINDSTUDIO_PROFILER_LOG)
    for folder in (output, log):
        shutil.rmtree(folder, ignore_errors=True)
    if data_simplification:
        return ""
    records = _cann_raw_data.read(cann_path)
    op_rows, time_rows = _summaries(records)
    stamp = datetime.datetime.now().strftime("%Y%m%d%H%M%S")
    os.makedirs(output, mode=0o750)
    os.makedirs(log, mode=0o750)
    write_atomically(os.path.join(output, f"op_summary_{stamp}.csv"), _csv_text(OP_SUMMARY_COLUMNS, op_rows))
    write_atomically(os.path.join(output, f"task_time_{stamp}.csv"), _csv_text(TASK_TIME_COLUMNS, time_rows))
    devices = ", ".join(f"device_{d}: {len(t)} tasks" for d, t in sorted(records["tasks"].items())) or "no device"
    write_atomically(os.path.join(log, f"msprof_export_{stamp}.log"),
                     f"[{datetime.datetime.now():%Y-%m-%d %H:%M:%S}] exported {cann_path}\n"
                     f"host: {len(records['api_events'])} launch API calls, {len(records['node_info'])} ops\n"
                     f"{devices}\n"
                     f"wrote op_summary_{stamp}.csv ({len(op_rows)} rows), task_time_{stamp}.csv "
                     f"({len(time_rows)} rows)\n")
    return output
