"""DynamicProfilerUtils: what the dynamic profiler's parts share: the mode
(config file or dynolog), the rank, the log files, the status a rank reports.

Messages go to ``<config dir>/log/dp_<host>_<pid>_rank_<rank>.log`` (the
poller's to ``monitor_dp_...``), as in real torch_npu: a job of many ranks
would otherwise print each one per rank. In dynolog mode there is no config
folder, and they are printed instead.
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

_LOG_FILE_BYTES = 200 * 1024  # a log file rolls over (one backup) past this size


class DynamicProfilerUtils:
    class DynamicProfilerConfigModel(Enum):
        CFG_CONFIG = 0  # enabled by dynamic_profile.init(path): a profiler_config.json
        DYNO_CONFIG = 1  # enabled by MSMONITOR_USE_DAEMON=1: configs from dynolog

    class LoggerLevelEnum(Enum):
        INFO = 0
        WARNING = 1
        ERROR = 2

    class ProfilerStatus(Enum):
        UNINITIALIZED = -1
        IDLE = 0
        RUNNING = 1
        READY = 2

    DYNAMIC_PROFILER_MODEL = DynamicProfilerConfigModel.CFG_CONFIG
    LOGGER = logging.getLogger("DynamicProfiler")
    LOGGER_MONITOR = logging.getLogger("DynamicProfilerMonitor")

    CFG_CONFIG_PATH = None  # the folder dynamic_profile.init() watches
    CFG_BUFFER_SIZE = 1024 * 1024  # bytes of the shared segment: the largest config it carries
    POLL_INTERVAL = 2  # seconds between two reads of the config file (or polls of dynolog)

    # The status a rank reports to dynolog (msmonitor), under these keys.
    PROFILER_STATUS = "profiler_status"
    CURRENT_STEP = "current_step"
    START_STEP = "start_step"
    STOP_STEP = "stop_step"
    REPORT_INTERVAL = 1.0  # seconds between two reports

    _log_files = set()  # (logger name, file) pairs already attached

    @classmethod
    def init_logger(cls, is_monitor_process: bool = False, log_path: str = None):
        """Sends this process's messages (or its poller's) to a file under
        ``log_path``/log; calling it again for the same file changes nothing."""
        logger = cls.LOGGER_MONITOR if is_monitor_process else cls.LOGGER
        folder = os.path.join(log_path, "log")
        name = f"dp_{socket.gethostname()}_{os.getpid()}_rank_{cls.get_rank_id()}.log"
        log_file = os.path.join(folder, ("monitor_" if is_monitor_process else "") + name)
        if (logger.name, log_file) in cls._log_files:
            return
        PathManager.make_dir_safety(folder)
        PathManager.create_file_safety(log_file)
        handler = RotatingFileHandler(filename=log_file, maxBytes=_LOG_FILE_BYTES, backupCount=1)
        handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] [%(process)d] %(filename)s: %(message)s"))
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)
        cls._log_files.add((logger.name, log_file))

    @classmethod
    def is_dyno_model(cls) -> bool:
        return cls.DYNAMIC_PROFILER_MODEL != cls.DynamicProfilerConfigModel.CFG_CONFIG

    @classmethod
    def out_log(cls, message: str, level: LoggerLevelEnum = LoggerLevelEnum.INFO, is_monitor_process: bool = False):
        """To the log file in config-file mode, to the console in dynolog mode."""
        if cls.is_dyno_model():
            cls.stdout_log(message, level)
            return
        logger = cls.LOGGER_MONITOR if is_monitor_process else cls.LOGGER
        log = {cls.LoggerLevelEnum.INFO: logger.info, cls.LoggerLevelEnum.WARNING: logger.warning,
               cls.LoggerLevelEnum.ERROR: logger.error}[level]
        log(message, stacklevel=2)  # the line names the caller's file

    @classmethod
    def stdout_log(cls, message: str, level: LoggerLevelEnum = LoggerLevelEnum.INFO):
        {cls.LoggerLevelEnum.INFO: print_info_msg, cls.LoggerLevelEnum.WARNING: print_warn_msg,
         cls.LoggerLevelEnum.ERROR: print_error_msg}[level](message)

    @staticmethod
    def get_rank_id() -> int:
        """$RANK (torchrun's), else the initialised process group's rank, else -1."""
        rank = os.environ.get("RANK")
        if rank is None:
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                return torch.distributed.get_rank()
            return -1
        try:
            return int(rank)
        except ValueError:
            print_warn_msg(f"Get rank id failed: RANK={rank!r} is not an integer, rank_id will be set to -1 !")
            return -1

    @staticmethod
    def dyno_str_to_json(res: str) -> dict:
        """dynolog's reply, ``KEY=value`` lines, as a dict of strings."""
        pairs = (line.split("=") for line in str(res).split("\n"))
        return {p[0].strip(): p[1].strip() for p in pairs if len(p) == 2}

    @staticmethod
    def parse_str_params_to_list(params) -> list:
        """``"a, b"`` -> ``["a", "b"]``; None or "None" -> []."""
        if params is None or params == "None":
            return []
        return [item.strip() for item in str(params).split(",")]
