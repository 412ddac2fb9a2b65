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

import contextlib
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

# ---------------------------------------------------------------------------
# Silent-check switches

_BOOLEAN_WORDS = ("true", "false")
_ASD_LEVELS = ("0", "1", "2", "3")

# NPU_ASD_CONFIG's integer settings, each applied through matmul_check:
# key -> (value used when the key is absent, least valid value, setter).
_ASD_INTEGERS = {
    "cooldown": (5, 1, matmul_check.set_cooldown),
    "strikes_num": (3, 1, matmul_check.set_strikes_num),
    "strikes_window": (480, 1, matmul_check.set_strikes_window),
    "checksum_cooldown": (180, 1, matmul_check.set_checksum_cooldown),
    "upper_thresh1": (1000000, 3, matmul_check.set_upper_thresh1),
    "upper_thresh2": (100, 3, matmul_check.set_upper_thresh2),
    "grad_sample_interval": (3, 1, matmul_check.set_grad_sample_interval),
}


def _parse_config(text):
    """A "key:value,key:value" setting as a dict. An entry that is not
    exactly one key and one value is ignored, as torch_npu ignores it."""
    settings = {}
    for entry in (text or "").split(","):
        key, colon, value = entry.partition(":")
        if colon and ":" not in value:
            settings[key] = value
    return settings


def _checked_integer(settings, key):
    """The integer NPU_ASD_CONFIG gives `key`, or None (with a warning) when
    the text is not a whole number of at least the key's minimum."""
    default, least, _ = _ASD_INTEGERS[key]
    text = settings.get(key, str(default))
    if text.isdigit() and int(text) >= least:
        return int(text)
    warnings.warn(f"NPU_ASD_CONFIG-{key} is invalid; using the default value of {default}.")
    return None


def _prase_asd_config(asd_config):
    """Hands NPU_ASD_CONFIG's settings (strings) to silent check 3.0.
    with_checksum other than true/false is an error; an invalid number is
    skipped with a warning, so the check keeps its default. (The typo in
    the name is torch_npu's, whose tests import it.)"""
    checksum = asd_config.get("with_checksum", "false")
    if checksum not in _BOOLEAN_WORDS:
        raise ValueError("NPU_ASD_CONFIG-with_checksum should be true or false. For details, 0 as `with checksum "
                         "closed`, 1 as `with checksum opened`." + pta_error(ErrCode.VALUE))
    matmul_check.set_with_checksum(checksum == "true")
    for key, (_, _, setter) in _ASD_INTEGERS.items():
        number = _checked_integer(asd_config, key)
        if number is not None:
            setter(number)


def _warn_check_not_performed(request):
    warnings.warn(f"{request}: silent data corruption detection is not supported on vNPU (its checks are the "
                  "Ascend chip's, or not yet emulated); training runs without it.")


def _configure_silent_check_3(text):
    settings = _parse_config(text)
    switch = settings.get("enable", "false")
    if switch not in _BOOLEAN_WORDS:
        raise ValueError("NPU_ASD_CONFIG-enable should be true or false. For details, false as `ASD closed`, "
                         "true as `ASD opened`." + pta_error(ErrCode.VALUE))
    if switch == "true":
        _prase_asd_config(settings)
        _warn_check_not_performed("NPU_ASD_CONFIG=enable:true (silent check 3.0)")


def _configure_silent_check_2(level):
    if level not in _ASD_LEVELS:
        raise ValueError("NPU_ASD_ENABLE should be 0, 1, 2 or 3. For details, 0 as `ASD closed`, 1 as `ASD "
                         "opened, print error logs`, 2 as `ASD opened, print error logs and raise exception`, "
                         "3 as `ASD opened, print debug logs and raise exception`" + pta_error(ErrCode.VALUE))
    if level != "0":
        _warn_check_not_performed(f"NPU_ASD_ENABLE={level} (silent check 2.0)")


# ---------------------------------------------------------------------------
# Step-time log files

_PERF_LOGGER = "perf_logger"
_MAX_LOG_BYTES = 50 * 1024 * 1024
_KEPT_OLD_LOGS = 3
_LOG_MODE = stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP  # 0o640


def _validate_path(path):
    return os.path.isabs(path) and os.path.exists(path)


def _get_perf_dump_path():
    folder = os.environ.get("PERF_DUMP_PATH")
    if not folder or not _validate_path(folder):
        raise RuntimeError("PERF_DUMP_PATH is empty or invalid." + pta_error(ErrCode.VALUE))
    return folder


def _get_uuid():
    """Names the job by its rendezvous address; a job without one gets the
    single-machine default 127.0.0.1_8888."""
    address = os.environ.get("MASTER_ADDR")
    port = os.environ.get("MASTER_PORT")
    if address is not None and port is not None:
        return f"{address}_{port}"
    return "127.0.0.1_8888"


def delete_pref_pt_logs(perf_dump_path, device_id):
    """Removes the earlier perf logs of ``device_id`` (rotated ones too) from
    the folder; symbolic links are not followed or removed."""
    pattern = os.path.join(perf_dump_path, f"perf_pt_*_{device_id}.log*")
    for old_log in filter(lambda name: not os.path.islink(name), glob.glob(pattern)):
        try:
            os.remove(old_log)
        except OSError as error:
            raise RuntimeError(f"Failed to delete {old_log}. Please delete it manually."
                               + pta_error(ErrCode.SYSCALL)) from error


class CustomRotatingFileHandler(RotatingFileHandler):
    """A RotatingFileHandler whose every new file opens with the log header,
    so that each file can be read on its own."""

    def doRollover(self):
        super().doRollover()
        os.chmod(self.baseFilename, _LOG_MODE)
        if self.stream is not None:
            self.stream.write("".join(line + "\n" for line in _header_lines()))
            self.stream.flush()


def _setup_logger(name, path):
    """Points logger `name` at `path`: bare messages, INFO and above, not
    passed on to the root logger's handlers."""
    handler = CustomRotatingFileHandler(path, maxBytes=_MAX_LOG_BYTES, backupCount=_KEPT_OLD_LOGS)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.setLevel(logging.INFO)
    logger = logging.getLogger(name)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)


# ---------------------------------------------------------------------------
# Steps

class PerfDumpState:
    """What the step marker has seen: each outermost module called so far
    with its submodules (whose calls are not steps), the time of the last
    mark, and the log file with the identities written in its header."""

    def __init__(self):
        self.has_log = False
        self.log_file_name = ""
        self.local_uuid = ""
        self.uuid = ""
        self.last_time = None
        self.is_outer_call = True  # False while an outermost call runs
        self.module_dict = {}

    def add_module_dict(self, module):
        self.module_dict[module] = [child for _, child in module.named_modules() if child is not module]

    def is_child_module(self, module):
        for children in self.module_dict.values():
            if module in children:
                return True
        return False


perf_dump_state = PerfDumpState()
perf_dump_enable = False


def _header_lines():
    return [f"[LOCALUUID]:{perf_dump_state.local_uuid}",
            "[FRAMEWORK]:PyTorch",
            f"[UUID]:{perf_dump_state.uuid}"]


def _start_perf_log():
    """Creates this process's log (once the device is known), replacing
    the device's logs of earlier runs, and writes its header."""
    import torch_npu

    folder = _get_perf_dump_path()
    device = torch_npu.npu.current_device()
    delete_pref_pt_logs(folder, device)
    perf_dump_state.log_file_name = os.path.join(folder, f"perf_pt_{os.getpid()}_{device}.log")
    perf_dump_state.uuid = _get_uuid()
    perf_dump_state.local_uuid = uuid.uuid4()
    _setup_logger(_PERF_LOGGER, perf_dump_state.log_file_name)
    for line in _header_lines():
        logging.getLogger(_PERF_LOGGER).info(line)
    os.chmod(perf_dump_state.log_file_name, _LOG_MODE)
    perf_dump_state.has_log = True


def _is_loss_module(module):
    return isinstance(module, torch.nn.modules.loss._Loss)


def _mark_step(module):
    """Ends the step that the previous mark began, if any, and begins one.
    A loss, or a part of a model already seen, is no step of its own."""
    if _is_loss_module(module) or perf_dump_state.is_child_module(module):
        return
    now_ms = int(time.time() * 1000)
    if perf_dump_state.last_time is not None:
        logging.getLogger(_PERF_LOGGER).info("[STEPTIME]:%s,%s", perf_dump_state.last_time, now_ms)
    perf_dump_state.last_time = now_ms
    perf_dump_state.add_module_dict(module)


@contextlib.contextmanager
def _outermost_call():
    """Calls made while this is open are nested ones."""
    perf_dump_state.is_outer_call = False
    try:
        yield
    finally:
        perf_dump_state.is_outer_call = True


def _perf_dump_decorator(func):
    """Wraps Module.__call__ so that each outermost call marks a step."""

    @wraps(func)
    def wrapper(self, *args, **kwargs):
        if not (perf_dump_enable and torch.npu.is_initialized()):
            return func(self, *args, **kwargs)
        if not perf_dump_state.has_log:
            _start_perf_log()
        if not perf_dump_state.is_outer_call:
            return func(self, *args, **kwargs)
        _mark_step(self)
        with _outermost_call():
            return func(self, *args, **kwargs)

    return wrapper


_module_call = Module.__call__


@_perf_dump_decorator
def _custom_call(self, *args, **kwargs):
    return _module_call(self, *args, **kwargs)


def add_perf_dump_patch():
    """Reads PERF_DUMP_CONFIG, NPU_ASD_CONFIG and NPU_ASD_ENABLE (called at
    import); patches Module.__call__ when the perf dump is on.
    NPU_ASD_CONFIG, when set, takes the place of NPU_ASD_ENABLE."""
    global perf_dump_enable
    dump = _parse_config(os.getenv("PERF_DUMP_CONFIG")).get("enable", "false")
    perf_dump_enable = dump.lower() == "true"

    asd_config = os.getenv("NPU_ASD_CONFIG")
    if asd_config is None:
        _configure_silent_check_2(os.getenv("NPU_ASD_ENABLE", "0"))
    else:
        _configure_silent_check_3(asd_config)

    if perf_dump_enable:
        Module.__call__ = _custom_call
