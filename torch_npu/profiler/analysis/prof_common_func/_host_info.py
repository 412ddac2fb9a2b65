"""What a profile records of the host it ran on: its name and id, and the environment settings that
change how torch_npu runs (profiler_metadata.json's and the db's ENV_VARIABLES)."""

import hashlib
import os
import socket

__all__ = []

_ENV_VARS = ("ASCEND_GLOBAL_LOG_LEVEL", "HCCL_RDMA_TC", "HCCL_RDMA_SL", "ACLNN_CACHE_LIMIT", "HOST_CACHE_CAPACITY",
             "ASCEND_ENHANCE_ENABLE", "PYTORCH_NPU_ALLOC_CONF", "ASCEND_LAUNCH_BLOCKING", "HCCL_ALGO")


def collect_env_vars():
    """{"ENV_VARIABLES": {name: value}} of the settings torch_npu records, "" for those unset."""
    return {"ENV_VARIABLES": {name: os.environ.get(name, "") for name in _ENV_VARS}}


def _machine_id():
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path) as f:
                value = f.read().strip()
        except OSError:
            continue
        if value:
            return value
    return socket.gethostname()


def get_host_info():
    """{"host_name", "host_uid"}: the host's name, and a number that tells hosts apart (from the
    machine id), as the db's HOST_INFO holds them."""
    digest = hashlib.sha256(_machine_id().encode()).digest()
    return {"host_name": socket.gethostname(), "host_uid": str(int.from_bytes(digest[:8], "big") >> 1)}
