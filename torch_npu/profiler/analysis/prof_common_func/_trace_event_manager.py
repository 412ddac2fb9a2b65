"""Builds Chrome-trace events (trace_view.json) from the profile's beans.

Times come in as int ns and go out as the trace's us: "ts" as exact text
(convert_ns2us_str), "dur" as a float.
"""

from torch_npu.profiler.analysis.prof_common_func._constant import (
    Constant, convert_ns2us_float, convert_ns2us_str,
)

__all__ = []

# Flow events bind to the enclosing slice ("bp": "e").
_BIND_ENCLOSING = "e"


def _flow_point(phase, name, flow_id, pid, tid, ts_ns, cat):
    return {"ph": phase, "bp": _BIND_ENCLOSING, "name": name, "id": flow_id, "pid": pid, "tid": tid,
            "ts": convert_ns2us_str(ts_ns), "cat": cat}


def _metadata(name, pid, tid, args):
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


class TraceEventManager:
    @classmethod
    def create_x_event(cls, event, cat: str) -> dict:
        """A complete ("X") event of ``event`` (a bean with name, pid, tid, ts, dur, args)."""
        return {"ph": "X", "name": event.name, "pid": event.pid, "tid": event.tid,
                "ts": convert_ns2us_str(event.ts), "dur": convert_ns2us_float(event.dur),
                "cat": cat, "args": event.args}

    @classmethod
    def create_m_event(cls, pid, tid_dict: dict) -> list:
        """The metadata of the host's Python process ``pid``: its name, label and place (first), then
        a name and a place for each of its threads (the keys of ``tid_dict``), in thread-id order."""
        events = [
            _metadata(Constant.PROCESS_NAME, pid, 0, {"name": "Python"}),
            _metadata(Constant.PROCESS_LABEL, pid, 0, {"labels": "CPU"}),
            _metadata(Constant.PROCESS_SORT, pid, 0, {"sort_index": 0}),
        ]
        for tid in tid_dict:
            events.append(_metadata(Constant.THREAD_NAME, pid, tid, {"name": f"Thread {tid}"}))
            # below the process row (sort index 0), ordered by thread id
            events.append(_metadata(Constant.THREAD_SORT, pid, tid, {"sort_index": tid + 1}))
        return events

    @classmethod
    def create_torch_to_npu_flow(cls, start_event, end_event) -> list:
        """The arrow from a host op (``start_event``) to the device task it launched (``end_event``);
        the task's start time names the flow."""
        flow_id = end_event.ts
        return [
            _flow_point("s", "torch_to_npu", flow_id, start_event.pid, start_event.tid, start_event.ts,
                        "async_npu"),
            _flow_point("f", "torch_to_npu", flow_id, end_event.pid, end_event.tid, end_event.ts,
                        "async_npu"),
        ]

    @classmethod
    def create_task_queue_flow(cls, phase: str, event) -> dict:
        """One end ("s" at the enqueue, "f" at the dequeue) of the arrow of a task-queue item, named
        by its correlation id."""
        return _flow_point(phase, "enqueue_to_dequeue", event.corr_id, event.pid, event.tid, event.ts,
                           "async_task_queue")

    @classmethod
    def create_fwd_flow(cls, event: dict) -> list:
        """The forward-to-backward arrows: ``event`` maps a flow id to its {"start": ..., "end": ...}
        points (each a dict of pid, tid, ts); flows missing an end are left out."""
        flows = []
        for flow_id, points in event.items():
            start, end = points.get("start"), points.get("end")
            if not start or not end:
                continue
            for phase, point in (("s", start), ("f", end)):
                flows.append(_flow_point(phase, "fwdbwd", flow_id, point.get("pid"), point.get("tid"),
                                         point.get("ts"), "fwdbwd"))
        return flows
