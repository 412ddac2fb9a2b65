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

import decimal
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

    # Names of the analysis steps (keys of the results a step hands to the steps depending on it).
    TORCH_OP_PARSER = "torch_op_parser"
    TASK_QUEUE_PARSER = "task_queue_parser"
    DB_PRE_PARSER = "db_pre_parser"
    STEP_INFO_PARSER = "step_info_parser"
    # Groups of framework api rows (FwkFileParser.get_fwk_api's keys).
    TORCH_OP_DATA = "torch_op_data"
    ENQUEUE_DATA = "enqueue_data"
    DEQUEUE_DATA = "dequeue_data"
    PYTHON_TRACE_DATA = "python_trace_data"
    MSTX_OP_DATA = "mstx_op_data"

    # msprof's own switches: set, they mean a CANN-level profile is running.
    MSPROF_STATIC_ENV = "PROFILER_SAMPLECONFIG"
    MSPROF_DYNAMIC_ENV = "PROFILING_MODE"

    # CANN's raw-data folder (PROF_<n>_<timestamp>_<id>/, _cann_raw_data.py) and msprof's export in it.
    CANN_DIR_PATTERN = r"^PROF_\d+_\d+_[0-9a-zA-Z]+"
    MINDSTUDIO_PROFILER_LOG = "mindstudio_profiler_log"

    # Keys of a torch op's args in the trace (PyTorch's own spellings).
    INPUT_SHAPES = "Input Dims"
    INPUT_DTYPES = "Input type"
    CALL_STACK = "Call stack"
    SEQUENCE_NUMBER = "Sequence number"
    FORWARD_THREAD_ID = "Fwd thread id"

    # A decoded binary record is handed to its bean as a dict: its fixed-size
    # part under this key, each variable-length field under its tag (an int).
    CONSTANT_BYTES = "constant_bytes"

    # Names of the trace's metadata ("ph": "M") events (Chrome trace format).
    PROCESS_NAME = "process_name"
    PROCESS_LABEL = "process_labels"
    PROCESS_SORT = "process_sort_index"
    THREAD_NAME = "thread_name"
    THREAD_SORT = "thread_sort_index"

    # Keys of one feature's description (FeatureManager).
    Compatibility = "compatibility"
    FeatureVersion = "feature_version"
    AffectedComponent = "affected_component"
    AffectedComponentVersion = "affected_component_version"
    InfoLog = "info_log"

    # Column types of the export_type "db" tables.
    SQL_TEXT_TYPE = "TEXT"
    SQL_INTEGER_TYPE = "INTEGER"
    SQL_NUMERIC_TYPE = "NUMERIC"
    SQL_REAL_TYPE = "REAL"


class DbConstant:
    """The names of export_type "db": its files, its tables, its reserved values."""
    DB_INVALID_VALUE = 4294967295  # an absent id or number (msprof's UINT32_MAX)
    DB_INVALID_CONNECTION_ID = -1

    DB_ASCEND_PYTORCH_PROFILER = "ascend_pytorch_profiler.db"  # ascend_pytorch_profiler_{rank}.db on a rank
    DB_ANALYSIS = "analysis.db"

    # msprof's tables (on Ascend, msprof's own database, which torch_npu's analysis takes over)
    TABLE_STRING_IDS = "STRING_IDS"
    TABLE_ENUM_API_TYPE = "ENUM_API_TYPE"
    TABLE_CANN_API = "CANN_API"
    TABLE_TASK = "TASK"
    TABLE_COMPUTE_TASK_INFO = "COMPUTE_TASK_INFO"
    TABLE_COMMUNICATION_TASK_INFO = "COMMUNICATION_TASK_INFO"
    TABLE_COMMUNICATION_OP = "COMMUNICATION_OP"
    TABLE_SESSION_TIME_INFO = "SESSION_TIME_INFO"
    TABLE_NPU_INFO = "NPU_INFO"
    TABLE_MSTX_EVENTS = "MSTX_EVENTS"
    TABLE_NPU_OP_MEM = "NPU_OP_MEM"
    # torch_npu's tables
    TABLE_PYTORCH_API = "PYTORCH_API"
    TABLE_CONNECTION_IDS = "CONNECTION_IDS"
    TABLE_PYTORCH_CALLCHAINS = "PYTORCH_CALLCHAINS"
    TABLE_MEMORY_RECORD = "MEMORY_RECORD"
    TABLE_OPERATOR_MEMORY = "OP_MEMORY"
    TABLE_META_DATA = "META_DATA"
    TABLE_RANK_DEVICE_MAP = "RANK_DEVICE_MAP"
    TABLE_HOST_INFO = "HOST_INFO"
    TABLE_STEP_TIME = "STEP_TIME"
    TABLE_GC_RECORD = "GC_RECORD"
    # analysis.db's tables
    TABLE_ANALYZER_BANDWIDTH = "CommAnalyzerBandwidth"
    TABLE_ANALYZER_MATRIX = "CommAnalyzerMatrix"
    TABLE_ANALYZER_TIME = "CommAnalyzerTime"
    TABLE_STEP_TRACE_TIME = "StepTraceTime"

    # Where each writer's string ids and connection ids start, so that they never collide:
    # msprof's from 0, the framework's and the memory's above.
    START_STRING_ID_FWK_API = 1 << 28
    START_STRING_ID_MEMORY = 2 << 28
    START_CONNECTION_ID_FWK_API = 5 << 28


def _columns(*spec):
    """("name TYPE", ...) as [(name, TYPE), ...]."""
    return [tuple(column.split()) for column in spec]


_I, _T, _N = Constant.SQL_INTEGER_TYPE, Constant.SQL_TEXT_TYPE, Constant.SQL_NUMERIC_TYPE


class TableColumnsManager:
    """Each table's columns, in order, with their sqlite types: torch_npu's tables and the msprof
    tables vNPU writes (msprof's "Profile Data File Reference (DB)"). Ids of strings (names, types,
    shapes) are INTEGER columns that point into STRING_IDS."""
    TableColumns = {
        DbConstant.TABLE_STRING_IDS: _columns(f"id {_I}", f"value {_T}"),
        DbConstant.TABLE_ENUM_API_TYPE: _columns(f"id {_I}", f"name {_T}"),
        DbConstant.TABLE_CANN_API: _columns(f"startNs {_I}", f"endNs {_I}", f"type {_I}", f"globalTid {_I}",
                                            f"connectionId {_I}", f"name {_I}"),
        DbConstant.TABLE_TASK: _columns(f"startNs {_I}", f"endNs {_I}", f"deviceId {_I}", f"connectionId {_I}",
                                        f"globalTaskId {_I}", f"globalPid {_I}", f"taskType {_I}", f"contextId {_I}",
                                        f"streamId {_I}", f"taskId {_I}", f"modelId {_I}"),
        DbConstant.TABLE_COMPUTE_TASK_INFO: _columns(
            f"name {_I}", f"globalTaskId {_I}", f"blockNum {_I}", f"mixBlockNum {_I}", f"taskType {_I}",
            f"opType {_I}", f"inputFormats {_I}", f"inputDataTypes {_I}", f"inputShapes {_I}", f"outputFormats {_I}",
            f"outputDataTypes {_I}", f"outputShapes {_I}", f"attrInfo {_I}", f"opState {_I}", f"hf32Eligible {_I}"),
        DbConstant.TABLE_COMMUNICATION_OP: _columns(
            f"opName {_I}", f"startNs {_I}", f"endNs {_I}", f"connectionId {_I}", f"groupName {_I}", f"opId {_I}",
            f"relay {_I}", f"retry {_I}", f"dataType {_I}", f"algType {_I}", f"count {_N}", f"opType {_I}",
            f"deviceId {_I}"),
        DbConstant.TABLE_SESSION_TIME_INFO: _columns(f"startTimeNs {_I}", f"endTimeNs {_I}"),
        DbConstant.TABLE_NPU_INFO: _columns(f"id {_I}", f"name {_T}"),
        DbConstant.TABLE_PYTORCH_API: _columns(
            f"startNs {_T}", f"endNs {_T}", f"globalTid {_I}", f"connectionId {_I}", f"name {_I}",
            f"sequenceNumber {_I}", f"fwdThreadId {_I}", f"inputDtypes {_I}", f"inputShapes {_I}",
            f"callchainId {_I}", f"type {_I}"),
        DbConstant.TABLE_CONNECTION_IDS: _columns(f"id {_I}", f"connectionId {_I}"),
        DbConstant.TABLE_PYTORCH_CALLCHAINS: _columns(f"id {_I}", f"stack {_I}", f"stackDepth {_I}"),
        DbConstant.TABLE_MEMORY_RECORD: _columns(
            f"component {_I}", f"timestamp {_I}", f"totalAllocated {_I}", f"totalReserved {_I}", f"totalActive {_I}",
            f"streamPtr {_I}", f"deviceId {_I}"),
        DbConstant.TABLE_OPERATOR_MEMORY: _columns(
            f"name {_I}", f"size {_I}", f"allocationTime {_I}", f"releaseTime {_I}", f"activeReleaseTime {_I}",
            f"duration {_I}", f"activeDuration {_I}", f"allocationTotalAllocated {_I}",
            f"allocationTotalReserved {_I}", f"allocationTotalActive {_I}", f"releaseTotalAllocated {_I}",
            f"releaseTotalReserved {_I}", f"releaseTotalActive {_I}", f"streamPtr {_I}", f"deviceId {_I}"),
        DbConstant.TABLE_META_DATA: _columns(f"name {_T}", f"value {_T}"),
        DbConstant.TABLE_RANK_DEVICE_MAP: _columns(f"rankId {_I}", f"deviceId {_I}"),
        DbConstant.TABLE_HOST_INFO: _columns(f"hostUid {_T}", f"hostName {_T}"),
        DbConstant.TABLE_STEP_TIME: _columns(f"id {_I}", f"startNs {_I}", f"endNs {_I}"),
        DbConstant.TABLE_GC_RECORD: _columns(f"startNs {_I}", f"endNs {_I}", f"globalTid {_I}"),
        DbConstant.TABLE_ANALYZER_BANDWIDTH: _columns(
            f"hccl_op_name {_T}", f"group_name {_T}", f"transport_type {_T}", f"transit_size {_N}",
            f"transit_time {_N}", f"bandwidth {_N}", f"large_packet_ratio {_N}", f"package_size {_N}", f"count {_N}",
            f"total_duration {_N}", f"step {_T}", f"type {_T}"),
        DbConstant.TABLE_ANALYZER_MATRIX: _columns(
            f"hccl_op_name {_T}", f"group_name {_T}", f"src_rank {_T}", f"dst_rank {_T}", f"transport_type {_T}",
            f"transit_size {_N}", f"transit_time {_N}", f"bandwidth {_N}", f"step {_T}", f"type {_T}",
            f"op_name {_T}"),
        DbConstant.TABLE_ANALYZER_TIME: _columns(
            f"hccl_op_name {_T}", f"group_name {_T}", f"start_timestamp {_N}", f"elapse_time {_N}",
            f"transit_time {_N}", f"wait_time {_N}", f"synchronization_time {_N}", f"idle_time {_N}", f"step {_T}",
            f"type {_T}"),
        DbConstant.TABLE_STEP_TRACE_TIME: _columns(
            f"deviceId {_I}", f"step {_T}", f"computing {_N}", f"communication_not_overlapped {_N}",
            f"overlapped {_N}", f"communication {_N}", f"free {_N}", f"stage {_N}", f"bubble {_N}",
            f"communication_not_overlapped_and_exclude_receive {_N}", f"preparing {_N}"),
    }


class TorchOpDataOri:
    """Columns of a framework api row as FwkFileParser.get_fwk_api builds it (before its api type,
    appended last)."""
    START_NS = 0
    END_NS = 1
    GLOBAL_TID = 2
    CONNECTION_ID = 3
    NAME = 4
    SEQUENCE_NUM = 5
    FWD_THREAD_ID = 6
    INPUT_DIMS = 7
    INPUT_SHAPES = 8
    CALL_STACK = 9


class ApiType:
    """ENUM_API_TYPE: the kinds of API rows (CANN_API.type, PYTORCH_API.type)."""
    ACL = 20000
    MODEL = 15000
    NODE = 10000
    COMMUNICATION = 5500
    RUNTIME = 5000
    TORCH_OP = 50001
    TASK_QUEUE = 50002
    PYTHON_TRACE = 50003
    MSTX_OP = 50004

    NAMES = {ACL: "acl", MODEL: "model", NODE: "node", COMMUNICATION: "communication", RUNTIME: "runtime",
             TORCH_OP: "op", TASK_QUEUE: "queue", PYTHON_TRACE: "trace", MSTX_OP: "mstx"}
    FRAMEWORK = (TORCH_OP, TASK_QUEUE, PYTHON_TRACE, MSTX_OP)  # what torch_npu adds to msprof's


def _require_int_ns(value):
    """Checks a time in ns: an int, or float("inf") for "never"."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a time in ns must be an int, got {type(value).__name__}")
    if isinstance(value, float) and value != float("inf"):
        raise TypeError(f"a time in ns must be an int, got the float {value!r}")


def convert_ns2us_float(ns) -> float:
    """ns (an int) as a float number of us."""
    _require_int_ns(ns)
    return ns / Constant.NS_TO_US


def convert_ns2us_str(ns, tail: str = "") -> str:
    """ns (an int) as us with three decimals, exactly (no float rounding), then ``tail``:
    1459635878536856678 -> "1459635878536856.678"."""
    _require_int_ns(ns)
    if ns == float("inf"):
        return "inf" + tail
    sign = "-" if ns < 0 else ""
    whole, frac = divmod(abs(ns), Constant.NS_TO_US)
    return f"{sign}{whole}.{frac:03d}{tail}"


def convert_us2ns(us, tail: str = "\t") -> int:
    """A time in us (a number, or text such as "12.345\t" in the trace's spelling) as int ns.
    Text is converted digit by digit, so "1459635878536856.678" -> 1459635878536856678; a float
    goes through its shortest repr first."""
    text = us.strip().rstrip(tail).strip() if isinstance(us, str) else repr(float(us))
    try:
        return int(decimal.Decimal(text) * Constant.NS_TO_US)
    except decimal.InvalidOperation as err:
        raise ValueError(f"not a time in us: {us!r}") from err


def contact_2num(high_num: int, low_num: int) -> int:
    """Two 32-bit halves as one 64-bit number (``high_num`` in the upper half)."""
    return (high_num << 32) | low_num


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
