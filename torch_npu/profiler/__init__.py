"""torch_npu.profiler: torch_npu's profiler API over torch.profiler and the
npu device activity (csrc/profiler). See docs/profiler.md."""

from torch_npu.profiler import _c_profiler

_c_profiler.install()  # torch_npu._C._profiler, the native session, before anything imports it
from torch_npu.profiler.experimental_config import (  # noqa: F401
    AiCMetrics, ExportType, HostSystem, ProfilerLevel, _ExperimentalConfig, supported_ai_core_metrics,
    supported_export_type, supported_profiler_level)
from torch_npu.profiler.profiler import (ProfilerAction, ProfilerActivity, _KinetoProfile, analyse, profile,
                                         schedule, supported_activities, tensorboard_trace_handler)
from torch_npu.profiler._add_metadata_sanitizer_patch import _apply_metadata_sanitizer_patch

_apply_metadata_sanitizer_patch()  # add_metadata keeps trace files valid JSON, on every device


def __getattr__(name):
    # dynamic_profile (and its shared-memory monitor) loads on first use, not at `import torch_npu`
    if name == "dynamic_profile":
        import importlib
        return importlib.import_module("torch_npu.profiler.dynamic_profile")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AiCMetrics", "ExportType", "HostSystem", "ProfilerAction", "ProfilerActivity", "ProfilerLevel",
           "_ExperimentalConfig", "analyse", "dynamic_profile", "profile", "schedule", "supported_activities",
           "supported_ai_core_metrics", "supported_export_type", "supported_profiler_level",
           "tensorboard_trace_handler"]
