"""The first steps of the analysis: read the framework's records once and hand them to the steps
that need them (the torch ops, the task-queue spans, and the api rows of export_type "db")."""

from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_common_func._log import ProfilerLogger
from torch_npu.profiler.analysis.prof_parse._fwk_file_parser import FwkFileParser, FwkFileTag
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []


def _failed(step, err):
    try:
        ProfilerLogger.get_instance().error("%s failed: %s", step, err)
    except Exception:  # the analysis log is not open
        pass
    return Constant.FAIL, None


class TaskQueueParser(BaseParser):
    """Result: {"enqueue_data": [...], "dequeue_data": [...]}."""

    def run(self, deps_data: dict):
        try:
            enqueues, dequeues = FwkFileParser(self._profiler_path).get_task_queue_data()
        except Exception as err:
            return _failed(self._name, err)
        return Constant.SUCCESS, {Constant.ENQUEUE_DATA: enqueues, Constant.DEQUEUE_DATA: dequeues}


class TorchOpParser(BaseParser):
    """Result: the torch op beans."""

    def run(self, deps_data: dict):
        try:
            ops = FwkFileParser(self._profiler_path).get_file_data_by_tag(FwkFileTag.TORCH_OP)
        except Exception as err:
            return _failed(self._name, err)
        return Constant.SUCCESS, ops


class DbPreParser(BaseParser):
    """Result: FwkFileParser.get_fwk_api's rows, from the two steps above."""

    def run(self, deps_data: dict):
        try:
            queue = deps_data.get(Constant.TASK_QUEUE_PARSER) or {}
            rows = FwkFileParser(self._profiler_path).get_fwk_api(
                deps_data.get(Constant.TORCH_OP_PARSER) or [],
                queue.get(Constant.ENQUEUE_DATA, []), queue.get(Constant.DEQUEUE_DATA, []))
        except Exception as err:
            return _failed(self._name, err)
        return Constant.SUCCESS, rows
