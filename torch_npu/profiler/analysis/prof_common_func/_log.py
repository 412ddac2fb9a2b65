"""The analysis's log file: <profile>/logs/profiler_<pid>.log (rotated).

One logger per process; ``ProfilerLogger.init(profile_path)`` (re)opens it,
``get_instance()`` returns it and fails before the first ``init``.
"""

import logging
import os
from logging.handlers import RotatingFileHandler

__all__ = []


class ProfilerLogger:
    DEFAULT_LOG_DIR = "logs"
    DEFAULT_LOG_LEVEL = logging.INFO
    LOG_FORMAT = "[%(asctime)s] [%(levelname)s] [%(process)d] %(filename)s: %(message)s"
    MAX_BYTES = 10 * 1024 * 1024  # per file
    BACKUP_COUNT = 3  # rotated files kept
    LOGGER_NAME = "torch_npu.profiler.analysis"

    _instance = None

    @classmethod
    def init(cls, output_dir: str, custom_name: str = None):
        """Opens the log under ``output_dir``/logs, at DEFAULT_LOG_LEVEL, replacing any earlier
        one."""
        log_dir = os.path.join(output_dir, cls.DEFAULT_LOG_DIR)
        os.makedirs(log_dir, mode=0o750, exist_ok=True)
        stem = f"profiler_{custom_name}" if custom_name else "profiler"
        log_file = os.path.join(log_dir, f"{stem}_{os.getpid()}.log")

        logger = logging.getLogger(cls.LOGGER_NAME)
        cls._close_handlers(logger)
        handler = RotatingFileHandler(log_file, maxBytes=cls.MAX_BYTES, backupCount=cls.BACKUP_COUNT)
        handler.setFormatter(logging.Formatter(cls.LOG_FORMAT))
        handler.setLevel(cls.DEFAULT_LOG_LEVEL)
        logger.addHandler(handler)
        logger.setLevel(cls.DEFAULT_LOG_LEVEL)
        logger.propagate = False  # the profile's log only, not the program's
        cls._instance = logger

    @classmethod
    def get_instance(cls) -> logging.Logger:
        if cls._instance is None:
            raise RuntimeError("ProfilerLogger is not initialized: call ProfilerLogger.init(path) first.")
        return cls._instance

    @classmethod
    def set_level(cls, level: int):
        logger = cls.get_instance()
        logger.setLevel(level)
        for handler in logger.handlers:
            handler.setLevel(level)

    @classmethod
    def destroy(cls):
        """Closes the log file."""
        if cls._instance is not None:
            cls._close_handlers(cls._instance)
            cls._instance = None

    @staticmethod
    def _close_handlers(logger):
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()
