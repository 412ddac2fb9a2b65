"""torch_npu.profiler._ExperimentalConfig and its enums.

Validated the way torch_npu does it: a bad value prints a warning in the
profiler's format (analysis/prof_common_func/_constant.py) and is reset to
its default; nothing raises. The values live in private attributes under
torch_npu's names (``_profiler_level``, ``_mstx_domain_include``, ...), which
profiler_info.json records as they are; read-only properties give them public
names. Calling the config gives the native side's copy
(``torch_npu._C._profiler._ExperimentalConfig``, profiler/_c_profiler.py).
"""

import warnings

from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_info_msg, print_warn_msg

__all__ = ["AiCMetrics", "ExportType", "HostSystem", "ProfilerLevel", "_ExperimentalConfig", "supported_profiler_level",
           "supported_ai_core_metrics", "supported_export_type"]


class ProfilerLevel:
    Level_none = Constant.LEVEL_NONE
    Level0 = Constant.LEVEL0
    Level1 = Constant.LEVEL1
    Level2 = Constant.LEVEL2


class AiCMetrics:
    AiCoreNone = Constant.AicMetricsNone
    PipeUtilization = Constant.AicPipeUtilization
    ArithmeticUtilization = Constant.AicArithmeticUtilization
    Memory = Constant.AicMemory
    MemoryL0 = Constant.AicMemoryL0
    ResourceConflictRatio = Constant.AicResourceConflictRatio
    MemoryUB = Constant.AicMemoryUB
    L2Cache = Constant.AicL2Cache
    MemoryAccess = Constant.AicMemoryAccess


class ExportType:
    Text = Constant.Text
    Db = Constant.Db


class HostSystem:
    """Host-side system data the profiler may sample (``host_sys``)."""
    CPU = Constant.CPU
    MEM = Constant.MEM
    DISK = Constant.DISK
    NETWORK = Constant.NETWORK
    OSRT = Constant.OSRT
    NUMA = Constant.NUMA


def _values(cls):
    return {v for k, v in vars(cls).items() if not k.startswith("_")}


def supported_profiler_level():
    """The profiler levels _ExperimentalConfig accepts."""
    return _values(ProfilerLevel)


def supported_ai_core_metrics():
    """The AI Core metric sets _ExperimentalConfig accepts (recorded; vNPU has no AI Core counters)."""
    return _values(AiCMetrics)


def supported_export_type():
    """The export types _ExperimentalConfig accepts."""
    return _values(ExportType)


_BOOL_SWITCHES = (  # attribute, name in the messages, default
    ("_l2_cache", "l2_cache", False),
    ("_msprof_tx", "msprof_tx", False),
    ("_mstx", "mstx", False),
    ("record_op_args", "record_op_args", False),
    ("_op_attr", "op_attr", False),
    ("_sys_io", "sys_io", False),
    ("_sys_interconnection", "sys_interconnection", False),
)


class _ExperimentalConfig:
    """What torch_npu's profiler records beyond torch.profiler's options.

    profiler_level: Level0 (operators and kernels; the default), Level1
    (adds AI Core metrics and communication), Level2, Level_none (mstx
    data only).
    aic_metrics: AI Core counters, Level1 and up; by default
    PipeUtilization there and AiCoreNone at Level0. vNPU has no AI Core
    counters: the value is recorded in profiler_info.json, and
    kernel_details.csv carries the cost model's estimate instead.
    export_type: "text" (csv/json files) and/or "db" (the sqlite
    databases ascend_pytorch_profiler[_{rank}].db and analysis.db,
    analysis/_db_export.py).
    data_simplification: remove msprof's export from the CANN raw-data
    folder after the analysis (the default), keeping the raw data only.
    mstx (msprof_tx, its deprecated name): the mstx ranges and marks the
    program emits are kept (``tx_enabled``), those of
    ``mstx_domain_include`` only, or all but ``mstx_domain_exclude``; with
    ``with_flops`` the npu fused operators also emit their FLOPs as ranges
    (torch_npu/profiler/_flops_hook.py).
    gc_detect_threshold: record Python's garbage collections that take at
    least this many milliseconds (0: all) as "GC" events of the trace.
    host_sys, sys_io, sys_interconnection, l2_cache, op_attr: recorded."""

    def __init__(self, profiler_level=Constant.LEVEL0, aic_metrics=None, l2_cache=False, msprof_tx=False,
                 mstx=False, data_simplification=True, record_op_args=False, op_attr=False,
                 gc_detect_threshold=None, export_type=ExportType.Text, host_sys=None, mstx_domain_include=None,
                 mstx_domain_exclude=None, sys_io=False, sys_interconnection=False):
        self._profiler_level = profiler_level
        self._aic_metrics = aic_metrics
        self._l2_cache = l2_cache
        self._msprof_tx = msprof_tx
        self._mstx = mstx
        self._data_simplification = data_simplification
        self.record_op_args = record_op_args
        self._export_type = self._export_type_list(export_type)
        self._host_sys = host_sys if host_sys else []
        self._op_attr = op_attr
        self._gc_detect_threshold = gc_detect_threshold
        self._mstx_domain_include = mstx_domain_include if mstx_domain_include else []
        self._mstx_domain_exclude = mstx_domain_exclude if mstx_domain_exclude else []
        self._sys_io = sys_io
        self._sys_interconnection = sys_interconnection
        self._check_params()
        self._check_mstx_domain_params()
        self._check_host_sys_params()

    def __call__(self):
        """The native side's copy of this config."""
        from torch_npu._C._profiler import _ExperimentalConfig as NativeConfig
        return NativeConfig(trace_level=self._profiler_level, metrics=self._aic_metrics, l2_cache=self._l2_cache,
                            record_op_args=self.record_op_args, msprof_tx=self.tx_enabled, op_attr=self._op_attr,
                            host_sys=self._host_sys, mstx_domain_include=self._mstx_domain_include,
                            mstx_domain_exclude=self._mstx_domain_exclude, sys_io=self._sys_io,
                            sys_interconnection=self._sys_interconnection)

    # --- public names of the values -------------------------------------------------

    profiler_level = property(lambda self: self._profiler_level)
    aic_metrics = property(lambda self: self._aic_metrics)
    l2_cache = property(lambda self: self._l2_cache)
    msprof_tx = property(lambda self: self._msprof_tx)
    mstx = property(lambda self: self._mstx)
    data_simplification = property(lambda self: self._data_simplification)
    op_attr = property(lambda self: self._op_attr)
    host_sys = property(lambda self: self._host_sys)
    mstx_domain_include = property(lambda self: self._mstx_domain_include)
    mstx_domain_exclude = property(lambda self: self._mstx_domain_exclude)
    sys_io = property(lambda self: self._sys_io)
    sys_interconnection = property(lambda self: self._sys_interconnection)

    @property
    def export_type(self):
        return self._export_type

    @property
    def gc_detect_threshold(self):
        return self._gc_detect_threshold

    @property
    def with_gc(self):
        """Whether garbage collections are recorded (gc_detect_threshold is set)."""
        return self._gc_detect_threshold is not None

    @property
    def tx_enabled(self):
        """Whether mstx data is collected (mstx or msprof_tx)."""
        return self._msprof_tx or self._mstx

    def to_dict(self):
        """The values under their attribute names, as profiler_info.json records them."""
        return dict(vars(self))

    # --- validation -------------------------------------------------------------------

    @staticmethod
    def _export_type_list(export_type):
        if isinstance(export_type, str) and export_type:
            return [export_type]
        if isinstance(export_type, (list, tuple)) and export_type:
            try:
                return sorted(set(export_type))
            except TypeError as error:  # unhashable elements
                print_warn_msg(f"Invalid parameter export_type: {export_type}, reset it to text. Error is {error}")
                return [ExportType.Text]
        print_warn_msg(f"Invalid parameter export_type: {export_type}, reset it to text.")
        return [ExportType.Text]

    def _check_params(self):
        for attr, name, default in _BOOL_SWITCHES:
            if not isinstance(getattr(self, attr), bool):
                print_warn_msg(f"Invalid parameter {name}, which must be of bool type, reset it to {default}.")
                setattr(self, attr, default)
        if self._msprof_tx:
            warnings.warn("The parameter msprof_tx will be deprecated. Please use the new parameter mstx instead.")
        if self._data_simplification is not None and not isinstance(self._data_simplification, bool):
            print_warn_msg("Invalid parameter data_simplification, which must be of bool type, reset it to default.")
            self._data_simplification = True
        if self._profiler_level not in supported_profiler_level():
            print_warn_msg("Invalid parameter profiler_level, reset it to ProfilerLevel.Level0.")
            self._profiler_level = ProfilerLevel.Level0
        if self._profiler_level == ProfilerLevel.Level_none and not self.tx_enabled:
            self._mstx = True
            print_warn_msg("Parameter mstx or msprof_tx must be True if profiler_level is set to Level_none.")
        self._check_aic_metrics()
        if not all(t in supported_export_type() for t in self._export_type):
            print_warn_msg("Invalid parameter export_type, reset it to text.")
            self._export_type = [ExportType.Text]
        if self._op_attr and ExportType.Db not in self._export_type:
            print_warn_msg("op_attr switch is invalid with export type set as text.")
            self._op_attr = False
        self._check_gc_detect_threshold()

    def _check_aic_metrics(self):
        counters = self._profiler_level in (ProfilerLevel.Level1, ProfilerLevel.Level2)
        if self._aic_metrics is None:  # not given: the level's default
            self._aic_metrics = AiCMetrics.PipeUtilization if counters else AiCMetrics.AiCoreNone
        elif not counters and self._aic_metrics != AiCMetrics.AiCoreNone:
            print_warn_msg("Please use level1 or level2 if you want to collect aic metrics, reset aic metrics to None!")
            self._aic_metrics = AiCMetrics.AiCoreNone
        elif self._aic_metrics not in supported_ai_core_metrics():
            print_warn_msg("Invalid parameter aic_metrics, reset it to default.")
            self._aic_metrics = AiCMetrics.PipeUtilization

    def _check_gc_detect_threshold(self):
        threshold = self._gc_detect_threshold
        if threshold is None:
            return
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            print_warn_msg("Parameter gc_detect_threshold is not int or float type, reset it to default.")
            self._gc_detect_threshold = None
        elif threshold < 0:
            print_warn_msg("Parameter gc_detect_threshold can not be negative, reset it to default.")
            self._gc_detect_threshold = None
        elif threshold == 0:
            print_info_msg("Parameter gc_detect_threshold is set to 0, it will collect all gc events.")

    def _check_mstx_domain_params(self):
        if not self.tx_enabled:
            if self._mstx_domain_include or self._mstx_domain_exclude:
                print_warn_msg("mstx_domain_include and mstx_domain_exclude are valid when msprof_tx or mstx is True.")
            self._mstx_domain_include = []
            self._mstx_domain_exclude = []
            return
        self._mstx_domain_include = self._domain_list("mstx_domain_include", self._mstx_domain_include)
        self._mstx_domain_exclude = self._domain_list("mstx_domain_exclude", self._mstx_domain_exclude)
        if self._mstx_domain_include and self._mstx_domain_exclude:
            print_warn_msg("Parameter mstx_domain_include and mstx_domain_exclude can not be both set, "
                           "only mstx_domain_include will work.")
            self._mstx_domain_exclude = []

    @staticmethod
    def _domain_list(name, domains):
        if not domains:
            return []
        if not isinstance(domains, list):
            print_warn_msg(f"Invalid parameter {name}, which must be of list type, reset it to default.")
            return []
        if not all(isinstance(d, str) for d in domains):
            print_warn_msg(f"Invalid parameter {name}, which contents must be of str type, reset it to default.")
            return []
        return sorted(set(domains))

    def _check_host_sys_params(self):
        if not isinstance(self._host_sys, list):
            print_warn_msg("Invalid parameter host_sys, which must be of list type, reset it to empty.")
            self._host_sys = []
        if not all(item in _values(HostSystem) for item in self._host_sys):
            print_warn_msg("Invalid parameter host_sys, reset it to empty.")
            self._host_sys = []
        self._host_sys = sorted({str(item) for item in self._host_sys})
