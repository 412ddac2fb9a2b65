"""The analysis's own log: <profile>/logs/profiler_<pid>.log, rotated by size.

There is one per process, held by ``ProfilerLogger``: ``init(profile_path)`` opens it (closing a
log opened earlier, so analysing a second profile does not write into the first one's folder),
``get_instance()`` returns it and raises RuntimeError before the first ``init``.
"""

import logging
import logging.handlers
import os

__all__ = []

# The log may grow to _KEEP_FILES + 1 files of _ROTATE_BYTES each.
_ROTATE_BYTES = 10 * 1024 * 1024
_KEEP_FILES = 3
_LINE_FORMAT = "[%(asctime)s] [%(levelname)s] [%(process)d] %(filename)s: %(message)s"


def _log_file_path(profile_path: str, custom_name) -> str:
    folder = os.path.join(profile_path, ProfilerLogger.DEFAULT_LOG_DIR)
    os.makedirs(folder, mode=0o750, exist_ok=True)
    prefix = "profiler" if not custom_name else f"profiler_{custom_name}"
    # The pid keeps processes that analyse the same profile from rotating each other's file.
    return os.path.join(folder, f"{prefix}_{os.getpid()}.log")


def _close_all_handlers(logger: logging.Logger):
    while logger.handlers:
        handler = logger.handlers[0]
        logger.removeHandler(handler)
        handler.close()


def _apply_level(logger: logging.Logger, level: int):
    # The handlers filter too, so they follow the logger's level.
    logger.setLevel(level)
    for handler in logger.handlers:
        handler.setLevel(level)


class ProfilerLogger:
    DEFAULT_LOG_DIR = "logs"
    DEFAULT_LOG_LEVEL = logging.INFO
    LOGGER_NAME = "torch_npu.profiler.analysis"

    _instance = None  # the open log; None before init and after destroy

    @classmethod
    def init(cls, output_dir: str, custom_name: str = None):
        """Opens the log in ``output_dir``/logs at DEFAULT_LOG_LEVEL."""
        path = _log_file_path(output_dir, custom_name)
        logger = logging.getLogger(cls.LOGGER_NAME)
        _close_all_handlers(logger)
        file_handler = logging.handlers.RotatingFileHandler(path, maxBytes=_ROTATE_BYTES, backupCount=_KEEP_FILES)
        file_handler.setFormatter(logging.Formatter(_LINE_FORMAT))
        logger.addHandler(file_handler)
        _apply_level(logger, cls.DEFAULT_LOG_LEVEL)
        logger.propagate = False  # the analysis's messages go to the profile, not to the program's log
        cls._instance = logger

    @classmethod
    def get_instance(cls):
        """The open log (a logging.Logger)."""
        if cls._instance is None:
            raise RuntimeError("ProfilerLogger is not initialized: call ProfilerLogger.init(path) first.")
        return cls._instance

    @classmethod
    def set_level(cls, level: int):
        _apply_level(cls.get_instance(), level)

    @classmethod
    def destroy(cls):
        """Closes the log file; a later get_instance fails until the next init."""
        logger, cls._instance = cls._instance, None
        if logger is not None:
            _close_all_handlers(logger)
