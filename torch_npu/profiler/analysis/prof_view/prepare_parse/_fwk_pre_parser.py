"""The analysis's first steps: each reads one kind of the framework's records (torch ops,
task-queue spans, the api rows of export_type "db") and hands it to the steps that depend on it.

Every step is the same apart from what it asks FwkFileParser for, so the common part (opening
the records, turning a failure into Constant.FAIL) lives once in ``_FwkRecordStep``.
"""

from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_common_func._log import ProfilerLogger  # noqa: F401  (real tests patch it here)
from torch_npu.profiler.analysis.prof_parse._fwk_file_parser import FwkFileParser, FwkFileTag
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []


class _FwkRecordStep(BaseParser):
    """A step whose result is read from the framework's records by ``_read``."""

    def _read(self, records: FwkFileParser, deps_data: dict):
        raise NotImplementedError

    def run(self, deps_data: dict):
        status, result = Constant.SUCCESS, None
        try:
            result = self._read(FwkFileParser(self._profiler_path), deps_data)
        except Exception as err:  # one unreadable kind of record must not stop the others
            self.logger.error("%s failed: %s", self._name, err)
            status = Constant.FAIL
        return status, result


class TaskQueueParser(_FwkRecordStep):
    """The task queue's spans: {"enqueue_data": [...], "dequeue_data": [...]}."""

    def _read(self, records, deps_data):
        enqueues, dequeues = records.get_task_queue_data()
        return {Constant.ENQUEUE_DATA: enqueues, Constant.DEQUEUE_DATA: dequeues}


class TorchOpParser(_FwkRecordStep):
    """The torch op beans, in record order."""

    def _read(self, records, deps_data):
        return records.get_file_data_by_tag(FwkFileTag.TORCH_OP)


class DbPreParser(_FwkRecordStep):
    """The api rows of the db export (FwkFileParser.get_fwk_api), built from what the two steps
    above found; a step that failed counts as no records."""

    def _read(self, records, deps_data):
        queue = deps_data.get(Constant.TASK_QUEUE_PARSER) or {}
        return records.get_fwk_api(deps_data.get(Constant.TORCH_OP_PARSER) or [],
                                   queue.get(Constant.ENQUEUE_DATA, []),
                                   queue.get(Constant.DEQUEUE_DATA, []))
