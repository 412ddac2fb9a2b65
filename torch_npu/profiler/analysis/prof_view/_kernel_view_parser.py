"""kernel_details.csv: msprof's op_summary rows (one per device task) under the analysis's column
names; Level0 without AI-core metrics keeps only the basic columns (and the tensor ones)."""

from torch_npu.profiler.analysis._profiler_config import ProfilerConfig
from torch_npu.profiler.analysis.prof_bean._op_summary_bean import OpSummaryBean
from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_common_func._csv_headers import CsvHeaders
from torch_npu.profiler.analysis.prof_common_func._file_manager import FileManager
from torch_npu.profiler.analysis.prof_parse._cann_file_parser import CANNDataEnum, CANNFileParser
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []

# msprof's column name -> kernel_details.csv's
_RENAMED = dict(zip(CsvHeaders.OP_SUMMARY_SHOW_HEADERS, CsvHeaders.OP_SUMMARY_KERNEL_BASE_HEADERS))


class KernelViewParser(BaseParser):
    KERNEL_VIEW = "kernel_details.csv"

    @staticmethod
    def _project_map_for_headers(headers: list) -> list:
        return [_RENAMED.get(header, header) for header in headers]

    @staticmethod
    def _get_kernel_headers(all_headers: list, show_all: bool) -> list:
        """Every column (show_all), else the basic ones and the tensor ones the file has."""
        if show_all:
            return list(all_headers)
        present = set(all_headers)
        return [header for header in CsvHeaders.OP_SUMMARY_SHOW_HEADERS + CsvHeaders.OP_SUMMARY_SHAPE_HEADERS
                if header in present]

    def generate_view(self):
        show_all = ProfilerConfig().is_all_kernel_headers()
        rows, headers = [], None
        for path in sorted(CANNFileParser(self._profiler_path).get_file_list_by_type(CANNDataEnum.OP_SUMMARY)):
            beans = FileManager.read_csv_file(path, OpSummaryBean)
            if not beans:
                continue
            if headers is None:
                headers = self._get_kernel_headers(list(beans[0].all_headers), show_all)
                OpSummaryBean.headers = headers  # the columns every bean's row gives
            rows.extend(bean.row for bean in beans)
        if headers is not None:
            FileManager.create_csv_file(self._output_path, rows, self.KERNEL_VIEW,
                                        self._project_map_for_headers(headers))

    def run(self, deps_data: dict):
        try:
            ProfilerConfig().load_info(self._profiler_path)
            self.generate_view()
        except Exception as err:
            self.logger.error("Failed to generate kernel_details.csv: %s", err)
            return Constant.FAIL, None
        return Constant.SUCCESS, None
