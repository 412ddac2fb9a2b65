"""Copies msprof's summary CSVs that the profile's config asks for (statistics, NIC, RoCE, PCIe, ...)
into ASCEND_PROFILER_OUTPUT under the analysis's file names: <kind>.csv, all the kind's files
concatenated."""

from torch_npu.profiler.analysis._profiler_config import ProfilerConfig
from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_common_func._file_manager import FileManager
from torch_npu.profiler.analysis.prof_common_func._log import ProfilerLogger
from torch_npu.profiler.analysis.prof_parse._cann_file_parser import CANNDataEnum, CANNFileParser
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []

# kinds whose output name is not simply their lower-cased enum name
_RENAMED_OUTPUT = {CANNDataEnum.AI_CPU: "data_preprocess"}


def output_name(file_type: CANNDataEnum) -> str:
    return _RENAMED_OUTPUT.get(file_type, file_type.name.lower()) + ".csv"


class IntegrateParser(BaseParser):
    _msprof_files = None  # the CANN folder's files, found on first use

    def _files_of(self, file_type):
        if self._msprof_files is None:
            self._msprof_files = CANNFileParser(self._profiler_path)
        return sorted(self._msprof_files.get_file_list_by_type(file_type))

    def generate_csv(self, file_type, bean_class):
        """One output CSV of every ``file_type`` file's rows (the first file's header)."""
        beans = [bean for path in self._files_of(file_type) for bean in FileManager.read_csv_file(path, bean_class)]
        if beans:
            FileManager.create_csv_file(self._output_path, [bean.row for bean in beans], output_name(file_type),
                                        list(beans[0].headers))

    def generate_view(self):
        wanted = ProfilerConfig().get_parser_bean()
        for file_type, bean_class in wanted:
            self.generate_csv(file_type, bean_class)

    def run(self, deps_data: dict):
        status = Constant.SUCCESS
        try:
            ProfilerConfig().load_info(self._profiler_path)
            self.generate_view()
        except Exception as err:
            ProfilerLogger.get_instance().error("Failed to generate integrated views: %s", err)
            status = Constant.FAIL
        return status, None
