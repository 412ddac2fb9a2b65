"""torch_npu's artifact/log names in torch._logging, as real torch_npu registers
them, so that ``TORCH_LOGS`` / ``TORCH_NPU_LOGS`` and ``torch._logging.set_logs``
accept them; ``TORCH_NPU_LOGS`` takes precedence over ``TORCH_LOGS``.

On vNPU two names log: ``env`` (each environment variable read through
``os.getenv`` / ``os.environ.get``, once: torch_npu.utils.patch_getenv) and
``op_plugin`` (each operator called on npu tensors, as the aclnn operator
real op-plugin launches for it, filtered by TORCH_NPU_LOGS_FILTER:
csrc/api/op_log.h). ``torch.distributed`` at INFO also shows the hccl
communicators' creation, as torch_npu's ProcessGroupHCCL logs it. The other
names are accepted so that settings written for real torch_npu work, and stay
silent: their sources (ACL, the dispatch queue, silent-check, recovery,
symmetric memory) do not exist on a virtual device.
"""

import functools
import os

import torch._logging
import torch._logging._internal as _torch_logging

# name -> logger, as real torch_npu registers them.
_LOG_NAMES = {
    "memory": "torch_npu.memory",
    "dispatch": "torch_npu.dispatch",
    "dispatch_time": "torch_npu.dispatch.time",
    "silent": "torch_npu.silent_check",
    "recovery": "torch_npu.recovery",
    "op_plugin": "torch_npu.op_plugin",
    "shmem": "torch_npu.symmetric_memory",
    "env": "torch_npu.env",
    "acl": "torch_npu.acl",
    "aclgraph": "torch_npu.npugraph",
    "npugraph": "torch_npu.npugraph",
}


def _add_logging_module():
    for name, logger in _LOG_NAMES.items():
        if name not in _torch_logging.log_registry.log_alias_to_log_qnames:
            _torch_logging.register_log(name, logger)


def _update_log_state_from_env():
    """TORCH_NPU_LOGS, when set, is read instead of TORCH_LOGS (same syntax)."""
    if os.environ.get("TORCH_NPU_LOGS") is not None:
        _torch_logging.LOG_ENV_VAR = "TORCH_NPU_LOGS"
        _torch_logging._init_logs()
        _apply_to_cpp()
    elif os.environ.get("TORCH_LOGS") is not None:
        # torch read TORCH_LOGS before these names existed: read it again.
        _torch_logging._init_logs()
        _apply_to_cpp()


def _apply_to_cpp():
    """Hands every level torch._logging holds to the C++ logs (torch_npu's
    LogContext.setLogs; it reads TORCH_NPU_LOGS_FILTER then)."""
    from torch_npu import _C

    levels = {name: level for name, level in _torch_logging.log_state.log_qname_to_level.items()
              if isinstance(level, int)}
    _C._logging._LogContext.GetInstance().setLogs(levels)


def _set_logs_also_in_cpp(set_logs):
    """torch._logging.set_logs, then the levels to C++, as real
    torch_npu does; TORCH_LOGS / TORCH_NPU_LOGS take precedence, as in torch."""
    @functools.wraps(set_logs)
    def wrapper(*args, **kwargs):
        result = set_logs(*args, **kwargs)
        if os.environ.get("TORCH_LOGS") is None and os.environ.get("TORCH_NPU_LOGS") is None:
            _apply_to_cpp()
        return result
    wrapper._torch_npu_wrapped = True
    return wrapper


def _setup():
    _add_logging_module()
    if not getattr(torch._logging.set_logs, "_torch_npu_wrapped", False):
        torch._logging.set_logs = _set_logs_also_in_cpp(torch._logging.set_logs)
    _update_log_state_from_env()
