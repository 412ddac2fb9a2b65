"""torch_npu.profiler._ExperimentalConfig: what the npu profiler records beyond torch.profiler's options.

A value the config cannot use never raises: like torch_npu, it prints a
warning in the profiler's console format (analysis/prof_common_func/_constant.py)
and takes the default instead. Each option is cleaned by one function below;
the few that depend on another option (AI Core metrics on the level, op_attr on
the export type, the mstx domains on mstx) are cleaned after the one they
depend on.

The cleaned values are kept under torch_npu's private attribute names
(``_profiler_level``, ``_mstx_domain_include``, ...; ``record_op_args`` is
public): profiler_info.json records them under exactly these names
(``to_dict``), and analysis/_profiler_config.py reads them back from there.
Each private value can also be read, not written, under its public name.

Calling a config gives the native session's copy of it,
``torch_npu._C._profiler._ExperimentalConfig`` (profiler/_c_profiler.py).
"""

import operator
import warnings

from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_info_msg, print_warn_msg

__all__ = ["AiCMetrics", "ExportType", "HostSystem", "ProfilerLevel", "_ExperimentalConfig", "supported_profiler_level",
           "supported_ai_core_metrics", "supported_export_type"]


# --- the accepted values -----------------------------------------------------------------

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


def _members(namespace):
    return {value for name, value in vars(namespace).items() if not name.startswith("_")}


def supported_profiler_level():
    """The profiler levels _ExperimentalConfig accepts."""
    return _members(ProfilerLevel)


def supported_ai_core_metrics():
    """The AI Core metric sets _ExperimentalConfig accepts (recorded; vNPU has no AI Core counters)."""
    return _members(AiCMetrics)


def supported_export_type():
    """The export types _ExperimentalConfig accepts."""
    return _members(ExportType)


# --- cleaning one option ---------------------------------------------------------------------

def _switch(name, value):
    """An on/off option: a bool, else False."""
    if isinstance(value, bool):
        return value
    print_warn_msg(f"Invalid parameter {name}, which must be of bool type, reset it to False.")
    return False


def _level(value):
    if value in supported_profiler_level():
        return value
    print_warn_msg("Invalid parameter profiler_level, reset it to ProfilerLevel.Level0.")
    return ProfilerLevel.Level0


def _ai_core_metrics(value, level):
    # AI Core counters exist from Level1 on; there the default set is PipeUtilization
    with_counters = level in (ProfilerLevel.Level1, ProfilerLevel.Level2)
    if value is None:
        return AiCMetrics.PipeUtilization if with_counters else AiCMetrics.AiCoreNone
    if not with_counters:
        if value != AiCMetrics.AiCoreNone:
            print_warn_msg("Please use level1 or level2 if you want to collect aic metrics, reset aic metrics to None!")
        return AiCMetrics.AiCoreNone
    if value in supported_ai_core_metrics():
        return value
    print_warn_msg("Invalid parameter aic_metrics, reset it to default.")
    return AiCMetrics.PipeUtilization


def _data_simplification(value):
    # None is let through: the analysis then decides
    if value is None or isinstance(value, bool):
        return value
    print_warn_msg("Invalid parameter data_simplification, which must be of bool type, reset it to default.")
    return True


def _export_types(value):
    """export_type as a sorted list of distinct known types; [text] when it cannot be one."""
    if isinstance(value, str) and value:
        kinds = [value]
    elif isinstance(value, (list, tuple)) and value:
        try:
            kinds = sorted(set(value))
        except TypeError as error:  # an element that cannot be hashed or ordered
            print_warn_msg(f"Invalid parameter export_type: {value}, reset it to text. Error is {error}")
            return [ExportType.Text]
    else:
        print_warn_msg(f"Invalid parameter export_type: {value}, reset it to text.")
        return [ExportType.Text]
    if set(kinds) <= supported_export_type():
        return kinds
    print_warn_msg("Invalid parameter export_type, reset it to text.")
    return [ExportType.Text]


def _gc_threshold(value):
    """Milliseconds a collection must take to be recorded, or None (collections not recorded)."""
    if value is None:
        return None
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not is_number:
        print_warn_msg("Parameter gc_detect_threshold is not int or float type, reset it to default.")
        return None
    if value < 0:
        print_warn_msg("Parameter gc_detect_threshold can not be negative, reset it to default.")
        return None
    if value == 0:
        print_info_msg("Parameter gc_detect_threshold is set to 0, it will collect all gc events.")
    return value


def _domains(name, value):
    """An mstx domain filter as a sorted list of distinct names; [] when it is not a list of str."""
    if not value:
        return []
    if not isinstance(value, list):
        print_warn_msg(f"Invalid parameter {name}, which must be of list type, reset it to default.")
        return []
    if any(not isinstance(domain, str) for domain in value):
        print_warn_msg(f"Invalid parameter {name}, which contents must be of str type, reset it to default.")
        return []
    return sorted(set(value))


def _domain_filters(include, exclude, tx_enabled):
    """(include, exclude): at most one of them set, and only when mstx data is collected."""
    if not tx_enabled:
        if include or exclude:
            print_warn_msg("mstx_domain_include and mstx_domain_exclude are valid when msprof_tx or mstx is True.")
        return [], []
    include = _domains("mstx_domain_include", include)
    exclude = _domains("mstx_domain_exclude", exclude)
    if include and exclude:
        print_warn_msg("Parameter mstx_domain_include and mstx_domain_exclude can not be both set, "
                       "only mstx_domain_include will work.")
        exclude = []
    return include, exclude


def _host_system(value):
    if not value:
        return []
    if not isinstance(value, list):
        print_warn_msg("Invalid parameter host_sys, which must be of list type, reset it to empty.")
        return []
    if not set(value) <= _members(HostSystem):
        print_warn_msg("Invalid parameter host_sys, reset it to empty.")
        return []
    return sorted({str(item) for item in value})


# --- the config ------------------------------------------------------------------------------

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
        export_types = _export_types(export_type)
        msprof_tx = _switch("msprof_tx", msprof_tx)
        if msprof_tx:
            warnings.warn("The parameter msprof_tx will be deprecated. Please use the new parameter mstx instead.")
        mstx = _switch("mstx", mstx)
        level = _level(profiler_level)
        if level == ProfilerLevel.Level_none and not (msprof_tx or mstx):
            # Level_none collects nothing but mstx data: without mstx there would be nothing at all
            mstx = True
            print_warn_msg("Parameter mstx or msprof_tx must be True if profiler_level is set to Level_none.")
        op_attr = _switch("op_attr", op_attr)
        if op_attr and ExportType.Db not in export_types:
            print_warn_msg("op_attr switch is invalid with export type set as text.")  # it only goes to the db
            op_attr = False
        include, exclude = _domain_filters(mstx_domain_include, mstx_domain_exclude, msprof_tx or mstx)

        # profiler_info.json lists these in this order
        self._profiler_level = level
        self._aic_metrics = _ai_core_metrics(aic_metrics, level)
        self._l2_cache = _switch("l2_cache", l2_cache)
        self._msprof_tx = msprof_tx
        self._mstx = mstx
        self._data_simplification = _data_simplification(data_simplification)
        self.record_op_args = _switch("record_op_args", record_op_args)
        self._export_type = export_types
        self._host_sys = _host_system(host_sys)
        self._op_attr = op_attr
        self._gc_detect_threshold = _gc_threshold(gc_detect_threshold)
        self._mstx_domain_include = include
        self._mstx_domain_exclude = exclude
        self._sys_io = _switch("sys_io", sys_io)
        self._sys_interconnection = _switch("sys_interconnection", sys_interconnection)

    def __call__(self):
        """The native session's copy of this config."""
        from torch_npu._C._profiler import _ExperimentalConfig as NativeExperimentalConfig
        return NativeExperimentalConfig(
            trace_level=self._profiler_level,
            metrics=self._aic_metrics,
            msprof_tx=self.tx_enabled,  # the native side knows one switch for both names
            record_op_args=self.record_op_args,
            l2_cache=self._l2_cache,
            op_attr=self._op_attr,
            sys_io=self._sys_io,
            sys_interconnection=self._sys_interconnection,
            host_sys=self._host_sys,
            mstx_domain_include=self._mstx_domain_include,
            mstx_domain_exclude=self._mstx_domain_exclude,
        )

    @property
    def with_gc(self):
        """Whether garbage collections are recorded (gc_detect_threshold is set)."""
        return self._gc_detect_threshold is not None

    @property
    def tx_enabled(self):
        """Whether mstx data is collected (mstx or msprof_tx)."""
        return self._mstx or self._msprof_tx

    def to_dict(self):
        """The values under their attribute names, as profiler_info.json records them."""
        return dict(vars(self))


def _read_only(attribute):
    return property(operator.attrgetter(attribute), doc=f"The cleaned value of {attribute[1:]} (read-only).")


# each private value under its public name: profiler_level for _profiler_level, ...
for _attribute in ("_profiler_level", "_aic_metrics", "_l2_cache", "_msprof_tx", "_mstx", "_data_simplification",
                   "_export_type", "_host_sys", "_op_attr", "_gc_detect_threshold", "_mstx_domain_include",
                   "_mstx_domain_exclude", "_sys_io", "_sys_interconnection"):
    setattr(_ExperimentalConfig, _attribute[1:], _read_only(_attribute))
del _attribute
