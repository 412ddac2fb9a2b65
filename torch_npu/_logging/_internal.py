"""torch_npu's artifact/log names in torch._logging, as real torch_npu registers
them, so that ``TORCH_LOGS`` / ``TORCH_NPU_LOGS`` and ``torch._logging.set_logs``
accept them; ``TORCH_NPU_LOGS`` takes precedence over ``TORCH_LOGS``.

On vNPU only ``env`` logs anything (each environment variable read through
``os.getenv`` / ``os.environ.get``, once: torch_npu.utils.patch_getenv); the
other names are accepted so that settings written for real torch_npu work,
and stay silent: their sources (ACL, the dispatch queue, silent-check,
recovery, symmetric memory) do not exist on a virtual device, and vNPU's
own op launches do not log under `acl` yet.
"""

import os

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
    elif os.environ.get("TORCH_LOGS") is not None:
        # torch read TORCH_LOGS before these names existed: read it again.
        _torch_logging._init_logs()


def _setup():
    _add_logging_module()
    _update_log_state_from_env()
