"""communication.json / communication_matrix.json: msprof's communication analysis, split by the
profile's steps, each op sorted into point-to-point or collective, with totals per group."""

from torch_npu.profiler.analysis.prof_common_func._constant import Constant, convert_us2ns
from torch_npu.profiler.analysis.prof_common_func._file_manager import FileManager
from torch_npu.profiler.analysis.prof_parse._cann_file_parser import CANNDataEnum, CANNFileParser
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []

_P2P_KEYWORDS = ("send", "receive", "recv")
_TOTAL = "total"
_TIME_INFO = "Communication Time Info"
_BANDWIDTH_INFO = "Communication Bandwidth Info"


class CommunicationParser(BaseParser):
    COMMUNICATION = "communication.json"
    MATRIX = "communication_matrix.json"

    def __init__(self, name: str, param_dict: dict):
        super().__init__(name, param_dict)
        self.step_list = []  # [{"step_id", "start_ts" (ns), "end_ts" (ns), "comm_ops": {...}}]

    @staticmethod
    def compute_ratio(dividend: float, divisor: float) -> float:
        return 0 if not divisor else round(dividend / divisor, 4)

    @staticmethod
    def split_communication_p2p_ops(op_data: dict) -> dict:
        """{"p2p": ops that send or receive, "collective": the others}; the totals entry is dropped."""
        groups = {"p2p": {}, "collective": {}}
        for name, info in op_data.items():
            lowered = name.lower()
            if lowered == _TOTAL:
                continue
            kind = "p2p" if any(word in lowered for word in _P2P_KEYWORDS) else "collective"
            groups[kind][name] = info
        return groups

    def compute_total_info(self, comm_ops: dict):
        """Adds "Total Op Info": the sums of every op's time and bandwidth figures."""
        if not comm_ops:
            return
        total = {_TIME_INFO: {}, _BANDWIDTH_INFO: {}}
        for info in comm_ops.values():
            for key, value in (info.get(_TIME_INFO) or {}).items():
                if isinstance(value, (int, float)) and "Timestamp" not in key:
                    total[_TIME_INFO][key] = total[_TIME_INFO].get(key, 0) + value
            for link, figures in (info.get(_BANDWIDTH_INFO) or {}).items():
                link_total = total[_BANDWIDTH_INFO].setdefault(link, {})
                for key, value in figures.items():
                    if isinstance(value, (int, float)):
                        link_total[key] = link_total.get(key, 0) + value
        for figures in total[_BANDWIDTH_INFO].values():
            figures["Bandwidth(GB/s)"] = self.compute_ratio(figures.get("Transit Size(MB)", 0),
                                                            figures.get("Transit Time(ms)", 0))
        comm_ops["Total Op Info"] = total

    def split_comm_op_by_step(self, communication_data: dict):
        """Puts every op under the step its start falls in."""
        for step in self.step_list:
            step.setdefault("comm_ops", {})
        for name, info in communication_data.items():
            start_us = (info.get(_TIME_INFO) or {}).get("Start Timestamp(us)")
            if start_us is None:
                continue
            start_ns = convert_us2ns(start_us)
            for step in self.step_list:
                if step["start_ts"] <= start_ns <= step["end_ts"]:
                    step["comm_ops"][name] = info
                    break

    def split_matrix_by_step(self, matrix_data: dict) -> dict:
        """msprof's matrix carries no times: without steps it stands as one "step"; with steps it
        is kept under the first (the matrix is the whole profile's)."""
        if not self.step_list:
            return {"step": matrix_data}
        return {f"step{self.step_list[0]['step_id']}": matrix_data}

    def generate_communication(self, output_path: str):
        data = CANNFileParser(self._profiler_path).get_analyze_communication_data(CANNDataEnum.COMMUNICATION)
        if not isinstance(data, dict) or not data:
            return
        steps = self.step_list or [{"step_id": "", "start_ts": 0, "end_ts": float("inf")}]
        self.step_list = steps
        self.split_comm_op_by_step(data)
        output = {}
        for step in self.step_list:
            groups = self.split_communication_p2p_ops(step["comm_ops"])
            for ops in groups.values():
                self.compute_total_info(ops)
            output[f"step{step['step_id']}"] = groups
        FileManager.create_json_file(output_path, output, self.COMMUNICATION)

    def generate_matrix(self, output_path: str):
        data = CANNFileParser(self._profiler_path).get_analyze_communication_data(CANNDataEnum.MATRIX)
        if not isinstance(data, dict) or not data:
            return
        FileManager.create_json_file(output_path, self.split_matrix_by_step(data), self.MATRIX)

    def run(self, deps_data: dict):
        try:
            self.step_list = list(deps_data.get(Constant.STEP_INFO_PARSER, []) or []) \
                if hasattr(Constant, "STEP_INFO_PARSER") else []
            self.generate_communication(self._output_path)
            self.generate_matrix(self._output_path)
        except Exception as err:
            self.logger.error("Failed to generate communication views: %s", err)
            return Constant.FAIL, None
        return Constant.SUCCESS, None
