"""torch_npu.profiler: torch_npu's profiler API over torch.profiler and the
npu device activity (csrc/profiler). See docs/profiler.md."""

from torch_npu.profiler.experimental_config import AiCMetrics, ExportType, ProfilerLevel, _ExperimentalConfig
from torch_npu.profiler.profiler import (ProfilerAction, ProfilerActivity, analyse, profile, schedule,
                                         supported_activities, tensorboard_trace_handler)
from torch_npu.profiler import dynamic_profile  # noqa: F401

__all__ = ["AiCMetrics", "ExportType", "ProfilerAction", "ProfilerActivity", "ProfilerLevel", "_ExperimentalConfig",
           "analyse", "dynamic_profile", "profile", "schedule", "supported_activities", "tensorboard_trace_handler"]
