"""DynamicProfilerUtils: the settings and small services the dynamic
profiler's parts share, under torch_npu's class name: which mode it runs in
(a config file, or dynolog), this process's rank, where messages go, and the
status a rank reports to dynolog.

Where messages go: a job of many ranks would print every message once per
rank, so in config-file mode each process writes them to its own file,
``<config folder>/log/dp_<host>_<pid>_rank_<rank>.log`` (its poller thread to
``monitor_dp_...``), as real torch_npu does. Dynolog mode has no folder: there
they are printed.
"""

import logging
import os
import socket
from enum import Enum
from logging.handlers import RotatingFileHandler

import torch

from torch_npu.profiler.analysis.prof_common_func._constant import print_error_msg, print_info_msg, print_warn_msg
from torch_npu.utils._path_manager import PathManager

__all__ = []


class _Mode(Enum):
    CFG_CONFIG = 0  # dynamic_profile.init(folder): the folder's profiler_config.json
    DYNO_CONFIG = 1  # MSMONITOR_USE_DAEMON=1: dynolog sends the configs


class _Level(Enum):
    INFO = 0
    WARNING = 1
    ERROR = 2


class _Status(Enum):
    """A rank's profiler as dynolog sees it (these numbers are sent)."""
    UNINITIALIZED = -1
    IDLE = 0
    RUNNING = 1
    READY = 2  # a config waits for its start_step


_LOGGING_LEVELS = {_Level.INFO: logging.INFO, _Level.WARNING: logging.WARNING, _Level.ERROR: logging.ERROR}
_CONSOLE = {_Level.INFO: print_info_msg, _Level.WARNING: print_warn_msg, _Level.ERROR: print_error_msg}
_LOG_LINE = "%(asctime)s [%(levelname)s] [%(process)d] %(filename)s: %(message)s"
_LOG_ROLLOVER_BYTES = 200 * 1024  # one backup is kept


def _rank_from_environment() -> int:
    """$RANK, as torchrun sets it; else the initialised process group's rank;
    else -1 (a single process)."""
    text = os.environ.get("RANK")
    if text is not None:
        try:
            return int(text)
        except ValueError:
            print_warn_msg(f"Get rank id failed: RANK={text!r} is not an integer, rank_id will be set to -1 !")
            return -1
    distributed = torch.distributed
    if distributed.is_available() and distributed.is_initialized():
        return distributed.get_rank()
    return -1


def _dyno_reply_fields(reply) -> dict:
    """dynolog's reply is ``KEY=value`` lines; a line of another shape is skipped."""
    fields = {}
    for line in str(reply).split("\n"):
        parts = line.split("=")
        if len(parts) == 2:
            fields[parts[0].strip()] = parts[1].strip()
    return fields


def _comma_list(params) -> list:
    """``"a, b"`` -> ``["a", "b"]``; dynolog writes a missing list as "None"."""
    if params is None or params == "None":
        return []
    return [item.strip() for item in str(params).split(",")]


def _log_file_name(for_poller: bool, rank: int) -> str:
    own = f"dp_{socket.gethostname()}_{os.getpid()}_rank_{rank}.log"
    return "monitor_" + own if for_poller else own


class DynamicProfilerUtils:
    DynamicProfilerConfigModel = _Mode
    LoggerLevelEnum = _Level
    ProfilerStatus = _Status

    DYNAMIC_PROFILER_MODEL = _Mode.CFG_CONFIG
    CFG_CONFIG_PATH = None  # the folder dynamic_profile.init() watches
    CFG_BUFFER_SIZE = 1024 * 1024  # bytes in the shared segment, so the largest config
    POLL_INTERVAL = 2  # seconds between two polls, until a step has been timed

    LOGGER = logging.getLogger("DynamicProfiler")
    LOGGER_MONITOR = logging.getLogger("DynamicProfilerMonitor")  # the poller's
    _log_files = set()  # (logger name, file) pairs that have a handler

    # the status report to dynolog: its keys, and the least time between two
    PROFILER_STATUS = "profiler_status"
    CURRENT_STEP = "current_step"
    START_STEP = "start_step"
    STOP_STEP = "stop_step"
    REPORT_INTERVAL = 1.0

    get_rank_id = staticmethod(_rank_from_environment)
    dyno_str_to_json = staticmethod(_dyno_reply_fields)
    parse_str_params_to_list = staticmethod(_comma_list)

    @classmethod
    def is_dyno_model(cls) -> bool:
        return cls.DYNAMIC_PROFILER_MODEL != _Mode.CFG_CONFIG

    @classmethod
    def _logger(cls, is_monitor_process):
        return cls.LOGGER_MONITOR if is_monitor_process else cls.LOGGER

    @classmethod
    def init_logger(cls, is_monitor_process: bool = False, log_path: str = None):
        """Sends this process's messages (``is_monitor_process``: its poller's)
        to their file under ``log_path``/log. Once per file: a second call for
        it adds no handler, so no line is written twice."""
        logger = cls._logger(is_monitor_process)
        folder = os.path.join(log_path, "log")
        path = os.path.join(folder, _log_file_name(is_monitor_process, cls.get_rank_id()))
        if (logger.name, path) in cls._log_files:
            return
        PathManager.make_dir_safety(folder)
        PathManager.create_file_safety(path)
        handler = RotatingFileHandler(filename=path, maxBytes=_LOG_ROLLOVER_BYTES, backupCount=1)
        handler.setFormatter(logging.Formatter(_LOG_LINE))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        cls._log_files.add((logger.name, path))

    @classmethod
    def out_log(cls, message: str, level: LoggerLevelEnum = _Level.INFO, is_monitor_process: bool = False):
        """A message for the log file; printed instead in dynolog mode."""
        if cls.is_dyno_model():
            cls.stdout_log(message, level)
            return
        # stacklevel 2: the line names the file that called out_log
        cls._logger(is_monitor_process).log(_LOGGING_LEVELS[level], message, stacklevel=2)

    @classmethod
    def stdout_log(cls, message: str, level: LoggerLevelEnum = _Level.INFO):
        _CONSOLE[level](message)
