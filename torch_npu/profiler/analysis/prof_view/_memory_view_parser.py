"""memory_record.csv and operator_memory.csv: the framework's allocator records next to CANN's
(GE / workspace) ones."""

from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_common_func._file_manager import FileManager
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []


def _timestamp_cell(time_ns) -> str:
    # memory_record.csv's stamp: six decimals and the trailing tab spreadsheet tools keep as text
    return f"{time_ns / 1e6:.6f}\t"


class MemoryViewParser(BaseParser):
    WORKSPACE = "workspace"

    @staticmethod
    def _record_row(record) -> list:
        return [record.component_type, _timestamp_cell(record.time_ns), record.total_allocated,
                record.total_reserved, record.total_active, record.stream_ptr, record.device_tag]

    @classmethod
    def _combine_record(cls, last_ge_record, record) -> list:
        """The rows one record adds: itself, and for a framework record after a GE one, their sum
        ("PTA+GE") too. Workspace records stand alone."""
        rows = [cls._record_row(record)]
        if record.component_type == cls.WORKSPACE or not last_ge_record:
            return rows
        rows.append(["PTA+GE", _timestamp_cell(record.time_ns),
                     record.total_allocated + last_ge_record.total_allocated,
                     record.total_reserved + last_ge_record.total_reserved,
                     record.total_active + last_ge_record.total_active,
                     record.stream_ptr, record.device_tag])
        return rows

    @staticmethod
    def _get_data_from_file(file_set: set, file_type_bean, bean_list: bool = False) -> list:
        """The beans (bean_list) or rows of the first file of ``file_set``; [] for none."""
        if not file_set:
            return []
        beans = FileManager.read_csv_file(sorted(file_set)[0], file_type_bean)
        return beans if bean_list else [bean.row for bean in beans]

    def run(self, deps_data: dict):
        try:
            self._cann_path = ProfilerPathManager.get_cann_path(self._profiler_path)
            self.generate_view(deps_data)
        except Exception as err:
            self.logger.error("Failed to generate memory views: %s", err)
            return Constant.FAIL, None
        return Constant.SUCCESS, None

    def generate_view(self, deps_data: dict):
        raise NotImplementedError(
            "MemoryViewParser.generate_view is not supported on vNPU: vNPU's own exporter "
            "(torch_npu.profiler.analysis, docs/profiler.md) writes memory_record.csv and operator_memory.csv; "
            "this step of real torch_npu's msprof-based pipeline is here for its helpers only.")
