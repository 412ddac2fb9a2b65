"""torch_npu.profiler.profiler_interface: the module real torch_npu keeps its
profiler session interface in; code imports ``supported_activities`` from it."""

from torch_npu.profiler.profiler import supported_activities

__all__ = ["supported_activities"]
