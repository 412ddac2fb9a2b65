"""Links the framework's side to the device's: which device tasks each dequeued op launched, and
where each profiler step ran on the device."""

import bisect

from torch_npu.profiler.analysis._profiler_config import ProfilerConfig
from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_common_func._log import ProfilerLogger
from torch_npu.profiler.analysis.prof_parse._cann_file_parser import CANNFileParser

__all__ = []


class FwkCANNRelationParser:
    def __init__(self, profiler_path: str):
        self._profiler_path = profiler_path

    @staticmethod
    def combine_kernel_dict(acl_to_npu_dict: dict, dequeue_data_list: list) -> dict:
        """{correlation id of the dequeue span a launch happened in: its device tasks}; with no
        task queue the launches keep their own keys. Launches outside every span are dropped."""
        if not dequeue_data_list:
            return acl_to_npu_dict
        spans = sorted(dequeue_data_list, key=lambda span: span.ts)
        starts = [span.ts for span in spans]
        kernels = {}
        for launch_ns, tasks in acl_to_npu_dict.items():
            index = bisect.bisect_right(starts, launch_ns) - 1
            if index < 0 or launch_ns > spans[index].ts + spans[index].dur:
                continue
            kernels.setdefault(spans[index].corr_id, []).extend(tasks)
        return kernels

    def get_kernel_dict(self, dequeue_data_list: list) -> dict:
        acl_to_npu = CANNFileParser(self._profiler_path).get_acl_to_npu_data()
        if not acl_to_npu:
            if ProfilerConfig().get_npu_level() != Constant.LEVEL_NONE:
                try:
                    ProfilerLogger.get_instance().warning("No device task is linked to a host launch.")
                except Exception:  # the analysis log is not open
                    pass
            return {}
        return self.combine_kernel_dict(acl_to_npu, dequeue_data_list)

    @staticmethod
    def _update_step_node_info(step_node_list: list, acl_start_time_list: list):
        """Counts each launch in the step whose host range holds it."""
        for launch_ns in acl_start_time_list:
            for step in step_node_list:
                if step.start_time <= launch_ns <= step.end_time:
                    step.update_corr_id_total(launch_ns)
                    break

    def get_step_range(self, root_node, kernel_dict) -> list:
        """[{"step_id", "start_ts", "end_ts"} (device ns)] of the steps that launched tasks; a step
        without tasks keeps its host range."""
        step_nodes = [node for node in root_node.child_node_list if node.is_profiler_step()]
        if not step_nodes or not kernel_dict:
            return []
        kernels = kernel_dict if isinstance(kernel_dict, dict) else {}
        self._update_step_node_info(step_nodes, sorted(kernels))
        steps = []
        for node in step_nodes:
            tasks = [task for launch in node.corr_id_total for task in kernels.get(launch, [])]
            start = min((task.ts for task in tasks), default=node.start_time)
            end = max((task.end_ns for task in tasks), default=node.end_time)
            steps.append({"step_id": str(node.name).split("#")[-1], "start_ts": start, "end_ts": end})
        return steps
