"""Step-time dumps (PERF_DUMP_CONFIG) and the silent-check switches
(NPU_ASD_CONFIG, NPU_ASD_ENABLE), read once at import, as real torch_npu
reads them.

Perf dump: with ``PERF_DUMP_CONFIG=enable:true`` and ``PERF_DUMP_PATH`` an
existing absolute folder, every call of an outermost module (not a loss,
not a submodule of one called before) marks a step, and the interval
between two marks is written to ``perf_pt_<pid>_<device>.log`` in that
folder as ``[STEPTIME]:<start ms>,<end ms>``, after a header of
``[LOCALUUID]``, ``[FRAMEWORK]:PyTorch`` and ``[UUID]:<MASTER_ADDR>_<MASTER_PORT>``.
Earlier logs of the same device are deleted when the first is written;
files rotate at 50 MiB (3 kept), each new one with the header. Nothing is
dumped before the npu device is initialised.

Silent checks: the settings are validated as real torch_npu validates them
(a bad value raises ValueError at import); vNPU does not perform the checks,
so enabling one warns instead (torch_npu/asd/asd.py).
"""

import glob
import logging
import os
import stat
import time
import uuid
import warnings
from functools import wraps
from logging.handlers import RotatingFileHandler

import torch
from torch.nn import Module

from torch_npu.asd.asd import matmul_check
from torch_npu.utils._error_code import ErrCode, pta_error

_original_call = Module.__call__
_LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
_LOG_PERMISSION = stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP
_LOG_BYTES = 50 * 1024 * 1024
_PERF_LOGGER = "perf_logger"


class PerfDumpState:
    """Which modules are steps: the outermost modules called so far, each
    with its submodules (whose calls are not steps)."""

    def __init__(self):
        self.module_dict = {}
        self.is_outer_call = True
        self.log_file_name = ""
        self.last_time = None
        self.has_log = False
        self.local_uuid = ""
        self.uuid = ""

    def add_module_dict(self, module):
        self.module_dict[module] = [sub for _, sub in module.named_modules() if sub is not module]

    def is_child_module(self, module):
        return any(module in children for children in self.module_dict.values())


perf_dump_state = PerfDumpState()
perf_dump_enable = False


def _write_header(stream):
    stream.write(f"[LOCALUUID]:{perf_dump_state.local_uuid}\n")
    stream.write("[FRAMEWORK]:PyTorch\n")
    stream.write(f"[UUID]:{perf_dump_state.uuid}\n")


class CustomRotatingFileHandler(RotatingFileHandler):
    """Rotates as RotatingFileHandler does; each new file starts with the header."""

    def doRollover(self):
        super().doRollover()
        fd = os.open(self.baseFilename, _LOG_FLAGS, _LOG_PERMISSION)
        os.fchmod(fd, _LOG_PERMISSION)
        with os.fdopen(fd, "w") as stream:
            _write_header(stream)


def _is_loss_module(module):
    return isinstance(module, torch.nn.modules.loss._Loss)


def _validate_path(path):
    return os.path.isabs(path) and os.path.exists(path)


def _get_perf_dump_path():
    path = os.environ.get("PERF_DUMP_PATH")
    if path and _validate_path(path):
        return path
    raise RuntimeError("PERF_DUMP_PATH is empty or invalid." + pta_error(ErrCode.VALUE))


def delete_pref_pt_logs(perf_dump_path, device_id):
    """Deletes the earlier perf logs of ``device_id`` in the folder (links are left)."""
    for log_file in glob.glob(os.path.join(perf_dump_path, f"perf_pt_*_{device_id}.log*")):
        if os.path.islink(log_file):
            continue
        try:
            os.remove(log_file)
        except OSError as e:
            raise RuntimeError(f"Failed to delete {log_file}. Please delete it manually."
                               + pta_error(ErrCode.SYSCALL)) from e


def _get_uuid():
    """The job's identity: MASTER_ADDR_MASTER_PORT (127.0.0.1_8888 without them)."""
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if addr is None or port is None:
        return "127.0.0.1_8888"
    return f"{addr}_{port}"


def _setup_logger(name, path):
    handler = CustomRotatingFileHandler(path, maxBytes=_LOG_BYTES, backupCount=3)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    logger.propagate = False


def _open_perf_log():
    import torch_npu
    path = _get_perf_dump_path()
    device = torch_npu.npu.current_device()
    delete_pref_pt_logs(path, device)
    perf_dump_state.local_uuid = uuid.uuid4()
    perf_dump_state.uuid = _get_uuid()
    perf_dump_state.log_file_name = os.path.join(path, f"perf_pt_{os.getpid()}_{device}.log")
    _setup_logger(_PERF_LOGGER, perf_dump_state.log_file_name)
    logger = logging.getLogger(_PERF_LOGGER)
    logger.info("[LOCALUUID]:%s", perf_dump_state.local_uuid)
    logger.info("[FRAMEWORK]:PyTorch")
    logger.info("[UUID]:%s", perf_dump_state.uuid)
    os.chmod(perf_dump_state.log_file_name, _LOG_PERMISSION)
    perf_dump_state.has_log = True


def _perf_dump_decorator(func):
    """Wraps Module.__call__: marks a step at each outermost call (see above)."""

    @wraps(func)
    def wrapper(self, *args, **kwargs):
        if not torch.npu.is_initialized():
            return func(self, *args, **kwargs)
        outer = False
        if perf_dump_enable:
            if not perf_dump_state.has_log:
                _open_perf_log()
            if perf_dump_state.is_outer_call:
                if not perf_dump_state.is_child_module(self) and not _is_loss_module(self):
                    now = int(time.time() * 1000)
                    if perf_dump_state.last_time is not None:
                        logging.getLogger(_PERF_LOGGER).info("[STEPTIME]:%s,%s", perf_dump_state.last_time, now)
                    perf_dump_state.last_time = now
                    perf_dump_state.add_module_dict(self)
                perf_dump_state.is_outer_call = False
                outer = True
        try:
            return func(self, *args, **kwargs)
        finally:
            if outer:
                perf_dump_state.is_outer_call = True

    return wrapper


@_perf_dump_decorator
def _custom_call(self, *args, **kwargs):
    return _original_call(self, *args, **kwargs)


def _parse_config(config):
    """"key:value,key:value" as a dict; entries without exactly one colon are skipped."""
    result = {}
    for item in (config or "").split(","):
        parts = item.split(":")
        if len(parts) == 2:
            result[parts[0]] = parts[1]
    return result


# NPU_ASD_CONFIG's numeric settings: (key, default, smallest valid, setter).
_ASD_NUMBERS = (
    ("cooldown", 5, 1, matmul_check.set_cooldown),
    ("strikes_num", 3, 1, matmul_check.set_strikes_num),
    ("strikes_window", 480, 1, matmul_check.set_strikes_window),
    ("checksum_cooldown", 180, 1, matmul_check.set_checksum_cooldown),
    ("upper_thresh1", 1000000, 3, matmul_check.set_upper_thresh1),
    ("upper_thresh2", 100, 3, matmul_check.set_upper_thresh2),
    ("grad_sample_interval", 3, 1, matmul_check.set_grad_sample_interval),
)


def _prase_asd_config(asd_config):
    """Applies NPU_ASD_CONFIG's settings (a dict of strings) to silent check
    3.0: with_checksum must be true or false (ValueError); a bad number
    warns and keeps the default. (The name's typo is real torch_npu's.)"""
    with_checksum = asd_config.get("with_checksum", "false")
    if with_checksum not in ("true", "false"):
        raise ValueError("NPU_ASD_CONFIG-with_checksum should be true or false. For details, 0 as `with checksum "
                         "closed`, 1 as `with checksum opened`." + pta_error(ErrCode.VALUE))
    matmul_check.set_with_checksum(with_checksum == "true")
    for key, default, smallest, setter in _ASD_NUMBERS:
        value = asd_config.get(key, str(default))
        if value.isdigit() and int(value) >= smallest:
            setter(int(value))
        else:
            warnings.warn(f"NPU_ASD_CONFIG-{key} is invalid; using the default value of {default}.")


def _asd_not_performed(which):
    warnings.warn(f"{which}: silent data corruption detection is not supported on vNPU (its checks are the "
                  "Ascend chip's, or not yet emulated); training runs without it.")


def add_perf_dump_patch():
    """Reads PERF_DUMP_CONFIG, NPU_ASD_CONFIG and NPU_ASD_ENABLE (called at
    import); patches Module.__call__ when the perf dump is on."""
    global perf_dump_enable
    perf_dump_enable = _parse_config(os.getenv("PERF_DUMP_CONFIG")).get("enable", "false").lower() == "true"

    asd_config = os.getenv("NPU_ASD_CONFIG")
    if asd_config is not None:
        settings = _parse_config(asd_config)
        enable = settings.get("enable", "false")
        if enable not in ("true", "false"):
            raise ValueError("NPU_ASD_CONFIG-enable should be true or false. For details, false as `ASD closed`, "
                             "true as `ASD opened`." + pta_error(ErrCode.VALUE))
        if enable == "true":
            _prase_asd_config(settings)
            _asd_not_performed("NPU_ASD_CONFIG=enable:true (silent check 3.0)")
    else:
        level = os.getenv("NPU_ASD_ENABLE", "0")
        if level not in ("0", "1", "2", "3"):
            raise ValueError("NPU_ASD_ENABLE should be 0, 1, 2 or 3. For details, 0 as `ASD closed`, 1 as `ASD "
                             "opened, print error logs`, 2 as `ASD opened, print error logs and raise exception`, "
                             "3 as `ASD opened, print debug logs and raise exception`" + pta_error(ErrCode.VALUE))
        if level != "0":
            _asd_not_performed(f"NPU_ASD_ENABLE={level} (silent check 2.0)")

    if perf_dump_enable:
        Module.__call__ = _custom_call
