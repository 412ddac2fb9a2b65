"""torch_npu.profiler._ExperimentalConfig and its enums, validated the way
torch_npu does it: a bad value warns and is reset to its default."""

import warnings

__all__ = ["AiCMetrics", "ExportType", "HostSystem", "ProfilerLevel", "_ExperimentalConfig", "supported_profiler_level",
           "supported_ai_core_metrics", "supported_export_type"]


class ProfilerLevel:
    Level_none = "Level_none"
    Level0 = "Level0"
    Level1 = "Level1"
    Level2 = "Level2"


class AiCMetrics:
    AiCoreNone = "ACL_AICORE_NONE"
    PipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    ArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    Memory = "ACL_AICORE_MEMORY_BANDWIDTH"
    MemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    ResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    MemoryUB = "ACL_AICORE_MEMORY_UB"
    L2Cache = "ACL_AICORE_L2_CACHE"
    MemoryAccess = "ACL_AICORE_MEMORY_ACCESS"


class ExportType:
    Text = "text"
    Db = "db"


class HostSystem:
    """Host-side system data the profiler may sample (``host_sys``)."""
    CPU = "cpu"
    MEM = "mem"
    DISK = "disk"
    NETWORK = "network"
    OSRT = "osrt"
    NUMA = "numa"


def supported_profiler_level():
    """The profiler levels _ExperimentalConfig accepts."""
    return set(_values(ProfilerLevel))


def supported_ai_core_metrics():
    """The AI Core metric sets _ExperimentalConfig accepts (recorded; vNPU has no AI Core counters)."""
    return set(_values(AiCMetrics))


def supported_export_type():
    """The export types _ExperimentalConfig accepts."""
    return set(_values(ExportType))


def _values(cls):
    return [v for k, v in vars(cls).items() if not k.startswith("_")]


class _ExperimentalConfig:
    """What torch_npu's profiler records beyond torch.profiler's options.

    profiler_level: Level0 (operators and kernels; the default), Level1
    (adds AI Core metrics and communication), Level2, Level_none.
    aic_metrics: AI Core counters (Level1 and up). On vNPU there are no AI
    Core counters: the value is recorded in profiler_info.json, and
    kernel_details.csv carries the cost model's estimate instead.
    export_type: "text" (csv/json files) or "db" (not supported: warns and
    falls back to text).
    mstx (msprof_tx, its deprecated name): the mstx ranges and marks the
    program emits are kept (``tx_enabled``); with ``with_flops`` the npu fused
    operators also emit their FLOPs as ranges (torch_npu/profiler/_flops_hook.py)."""

    def __init__(self, profiler_level=ProfilerLevel.Level0, aic_metrics=AiCMetrics.AiCoreNone, l2_cache=False,
                 msprof_tx=False, mstx=False, data_simplification=True, record_op_args=False, op_attr=False,
                 gc_detect_threshold=None, export_type=ExportType.Text, host_sys=(), mstx_domain_include=(),
                 mstx_domain_exclude=(), sys_io=False, sys_interconnection=False):
        self.profiler_level = profiler_level
        self.aic_metrics = aic_metrics
        self.l2_cache = l2_cache
        self.msprof_tx = msprof_tx
        self.mstx = mstx
        self.data_simplification = data_simplification
        self.record_op_args = record_op_args
        self.op_attr = op_attr
        self.gc_detect_threshold = gc_detect_threshold
        self.export_type = export_type
        self.host_sys = list(host_sys)
        self.mstx_domain_include = list(mstx_domain_include)
        self.mstx_domain_exclude = list(mstx_domain_exclude)
        self.sys_io = sys_io
        self.sys_interconnection = sys_interconnection
        self._check()

    def _reset(self, name, default, why):
        warnings.warn(f"Invalid parameter {name}, {why}, reset it to {default}.")
        setattr(self, name, default)

    def _check(self):
        if self.profiler_level not in _values(ProfilerLevel):
            self._reset("profiler_level", ProfilerLevel.Level0, f"which must be one of {_values(ProfilerLevel)}")
        if self.aic_metrics not in _values(AiCMetrics):
            self._reset("aic_metrics", AiCMetrics.AiCoreNone, f"which must be one of {_values(AiCMetrics)}")
        if self.profiler_level == ProfilerLevel.Level0 and self.aic_metrics != AiCMetrics.AiCoreNone:
            self._reset("aic_metrics", AiCMetrics.AiCoreNone, "which is only valid for Level1 and Level2")
        for flag in ("l2_cache", "msprof_tx", "mstx", "data_simplification", "record_op_args", "op_attr", "sys_io",
                     "sys_interconnection"):
            if not isinstance(getattr(self, flag), bool):
                self._reset(flag, flag == "data_simplification", "which must be a bool")
        if self.msprof_tx:
            warnings.warn("The parameter msprof_tx will be deprecated. Please use the new parameter mstx instead.")
        if self.profiler_level == ProfilerLevel.Level_none and not self.tx_enabled:
            self.mstx = True
            warnings.warn("Parameter mstx or msprof_tx must be True if profiler_level is set to Level_none.")
        if isinstance(self.export_type, str):
            self.export_type = [self.export_type]
        if not isinstance(self.export_type, list) or any(t not in _values(ExportType) for t in self.export_type):
            self._reset("export_type", [ExportType.Text], f"which must be in {_values(ExportType)}")
        if ExportType.Db in self.export_type:
            warnings.warn("export_type 'db' writes msprof's database, which vNPU has no CANN analysis tools to "
                          "build; the text export is written instead.")
            self.export_type = [ExportType.Text]
        if self.gc_detect_threshold is not None and (
                not isinstance(self.gc_detect_threshold, (int, float)) or self.gc_detect_threshold < 0):
            self._reset("gc_detect_threshold", None, "which must be a non-negative number")

    @property
    def tx_enabled(self):
        """Whether mstx data is collected (mstx or msprof_tx)."""
        return self.msprof_tx or self.mstx

    def to_dict(self):
        return {
            "_profiler_level": self.profiler_level, "_aic_metrics": self.aic_metrics, "_l2_cache": self.l2_cache,
            "_msprof_tx": self.msprof_tx, "_mstx": self.mstx, "_data_simplification": self.data_simplification,
            "_record_op_args": self.record_op_args, "_op_attr": self.op_attr,
            "_gc_detect_threshold": self.gc_detect_threshold, "_export_type": self.export_type,
        }
