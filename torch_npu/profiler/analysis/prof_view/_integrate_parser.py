"""Copies msprof's summary CSVs that the profile's config asks for (statistics, NIC, RoCE, PCIe, ...)
into ASCEND_PROFILER_OUTPUT under the analysis's file names."""

import os

from .._profiler_config import ProfilerConfig
from ..prof_common_func._constant import Constant
from ..prof_common_func._file_manager import FileManager
from ..prof_common_func._log import ProfilerLogger
from ..prof_parse._cann_file_parser import CANNDataEnum, CANNFileParser
from ._base_parser import BaseParser

__all__ = []

# output file name of each copied kind
_OUTPUT_NAME = {
    CANNDataEnum.OP_STATISTIC: "op_statistic.csv",
    CANNDataEnum.API_STATISTIC: "api_statistic.csv",
    CANNDataEnum.AI_CPU: "data_preprocess.csv",
    CANNDataEnum.L2_CACHE: "l2_cache.csv",
    CANNDataEnum.NIC: "nic.csv",
    CANNDataEnum.ROCE: "roce.csv",
    CANNDataEnum.PCIE: "pcie.csv",
    CANNDataEnum.HCCS: "hccs.csv",
}


class IntegrateParser(BaseParser):
    def run(self, deps_data: dict):
        try:
            ProfilerConfig().load_info(self._profiler_path)
            self.generate_view()
        except Exception as err:
            ProfilerLogger.get_instance().error("Failed to generate integrated views: %s", err)
            return Constant.FAIL, None
        return Constant.SUCCESS, None

    def generate_view(self):
        self._cann_parser = None
        for file_type, bean_class in ProfilerConfig().get_parser_bean():
            self.generate_csv(file_type, bean_class)

    def generate_csv(self, file_type, bean_class):
        if self._cann_parser is None:
            self._cann_parser = CANNFileParser(self._profiler_path)
        rows, headers = [], None
        for path in sorted(self._cann_parser.get_file_list_by_type(file_type)):
            for bean in FileManager.read_csv_file(path, bean_class):
                rows.append(bean.row)
                headers = headers or list(bean.headers)
        if rows:
            FileManager.create_csv_file(self._output_path, rows, _OUTPUT_NAME.get(file_type, os.devnull), headers)
