"""The profiler's shared names and its console messages.

``Constant`` holds the folder and file names of a profile, the keys of its
``profiler_info.json`` and the values ``_ExperimentalConfig`` accepts, under
real torch_npu's names, so the profiler's parts (and code written against
torch_npu) agree on one spelling.

The ``print_*_msg`` helpers write the profiler's console lines in torch_npu's
format, which log scrapers match::

    [2025-01-31 12:00:00] [WARNING] [4242] profiler.py: <message>

As in torch_npu, warnings are printed by rank 0 (or a process without
$RANK) only, and not at all with TORCH_NPU_WARNING_DISABLE=1 (or its
deprecated name TORCH_NPU_DISABLED_WARNING=1); both are read at each warning.
"""

import os
import time

__all__ = []


class Constant:
    INVALID_VALUE = -1
    NULL_VALUE = 0

    # Folders and files of a profile (``<worker>_<time>_ascend_pt/``).
    FRAMEWORK_DIR = "FRAMEWORK"
    OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
    ASCEND_WORK_PATH = "ASCEND_WORK_PATH"
    PROFILING_WORK_PATH = "profiling_data"
    PROFILER_META_DATA = "profiler_metadata.json"
    MINDSTUDIO_PROFILER_OUTPUT = "mindstudio_profiler_output"
    PLATFORM_ANALYSIS_DIR = "PLATFORM"
    TRACE_VIEW = "trace_view.json"

    # Limits on what the profiler reads and writes.
    MAX_FILE_SIZE = 10 * 1024 ** 3
    MAX_CSV_SIZE = 5 * 1024 ** 3
    MAX_PATH_LENGTH = 4096
    MAX_WORKER_NAME_LENGTH = 226
    MAX_FILE_NAME_LENGTH = 255
    PROF_WARN_SIZE = 1024 ** 3

    # Units.
    NS_TO_US = 1000
    US_TO_MS = 1000
    NS_TO_MS = 1000 * 1000
    B_TO_KB = 1024.0
    KB_TO_MB = 1024.0
    B_TO_MB = 1024.0 ** 2
    B_TO_GB = 1024.0 ** 3

    # What started an export (the "analysis" entry points).
    TENSORBOARD_TRACE_HANDLER = "tensorboard_trace_handler"
    EXPORT_CHROME_TRACE = "export_chrome_trace"
    EXPORT_STACK = "export_stack"
    EXPORT_MEMORY_TIMELINE = "export_memory_timeline"

    # Memory components.
    PTA = "PTA"
    GE = "GE"
    APP = "APP"
    PTA_GE = "PTA+GE"
    WORKSPACE = "WORKSPACE"

    # Keys of profiler_info.json.
    CONFIG = "config"
    RANK_ID = "rank_id"
    COMMON_CONFIG = "common_config"
    ACTIVITIES = "activities"
    CPU_ACTIVITIES = "ProfilerActivity.CPU"
    NPU_ACTIVITIES = "ProfilerActivity.NPU"
    EXPERIMENTAL_CONFIG = "experimental_config"
    END_INFO = "end_info"
    START_INFO = "start_info"
    # start_info: the clock the profile's host times were read on
    SyscntEable = "syscnt_enable"  # sic: torch_npu's name
    SysCntFreq = "freq"
    StartCnt = "start_cnt"
    StartMonotonic = "start_monotonic"
    # end_info: one reading of the wall clock and the monotonic clock together,
    # which converts the monotonic times (GC records) to the trace's clock
    FWK_END_TIME = "collectionTimeEnd"
    FWK_END_MONOTONIC = "MonotonicTimeEnd"
    TORCH_NPU_VERSION = "torch_npu_version"
    CANN_VERSION = "cann_version"

    # The attributes of _ExperimentalConfig that profiler_info.json records.
    PROFILER_LEVEL = "_profiler_level"
    AI_CORE_METRICS = "_aic_metrics"
    L2_CACHE = "_l2_cache"
    MSPROF_TX = "_msprof_tx"
    OP_ATTR = "_op_attr"
    DATA_SIMPLIFICATION = "_data_simplification"
    SYS_IO = "_sys_io"
    SYS_INTERCONNECTION = "_sys_interconnection"
    EXPORT_TYPE = "_export_type"

    # Values of _ExperimentalConfig.
    LEVEL0 = "Level0"
    LEVEL1 = "Level1"
    LEVEL2 = "Level2"
    LEVEL_NONE = "Level_none"
    AicPipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    AicArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    AicMemory = "ACL_AICORE_MEMORY_BANDWIDTH"
    AicMemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    AicMemoryUB = "ACL_AICORE_MEMORY_UB"
    AicResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    AicL2Cache = "ACL_AICORE_L2_CACHE"
    AicMemoryAccess = "ACL_AICORE_MEMORY_ACCESS"
    AicMetricsNone = "ACL_AICORE_NONE"
    Db = "db"
    Text = "text"
    # host_sys values
    CPU = "cpu"
    MEM = "mem"
    DISK = "disk"
    NETWORK = "network"
    OSRT = "osrt"
    NUMA = "numa"

    # Python garbage collections (ProfGCDetector): records of (pid, start, end)
    GC_RECORD_FORMAT = "<3Q"

    # export_stacks' metrics
    METRIC_CPU_TIME = "self_cpu_time_total"
    METRIC_NPU_TIME = "self_npu_time_total"

    # Status of a parse step.
    SUCCESS = 0
    FAIL = 1

    # msprof's own switches: set, they mean a CANN-level profile is running.
    MSPROF_STATIC_ENV = "PROFILER_SAMPLECONFIG"
    MSPROF_DYNAMIC_ENV = "PROFILING_MODE"


def _console_line(level: str, message: str) -> str:
    stamp = time.strftime("[%Y-%m-%d %H:%M:%S]", time.localtime())
    return f"{stamp} [{level}] [{os.getpid()}] profiler.py: {message}"


def print_info_msg(message: str):
    print(_console_line("INFO", message), flush=True)


def _warnings_enabled() -> bool:
    disabled = os.environ.get("TORCH_NPU_WARNING_DISABLE", os.environ.get("TORCH_NPU_DISABLED_WARNING"))
    if disabled == "1":
        return False
    return os.environ.get("RANK", "0") == "0"


def print_warn_msg(message: str):
    if _warnings_enabled():
        print(_console_line("WARNING", message), flush=True)


def print_error_msg(message: str):
    print(_console_line("ERROR", message), flush=True)
