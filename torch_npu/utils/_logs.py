"""torch_npu's log lines: "[LEVEL] <time> (PID:<pid>, Device:<index>, RankID:<rank>) <message>",
printed to stdout; Device is -1 before the NPU is initialised, RankID -1
outside a process group."""

import os
import sys
import time


def _prefix(level):
    import torch
    import torch_npu

    device = torch_npu.npu.current_device() if torch_npu.npu.is_initialized() else -1
    rank = -1
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        rank = torch.distributed.get_rank()
    stamp = time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime())
    return f"[{level}] {stamp} (PID:{os.getpid()}, Device:{device}, RankID:{rank})"


def _print(level, message):
    print(f"{_prefix(level)} {message}", file=sys.stdout, flush=True)


def print_error_log(message):
    _print("ERROR", message)


def print_warn_log(message):
    _print("WARNING", message)


def print_info_log(message):
    _print("INFO", message)
