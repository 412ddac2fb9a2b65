"""The NPU_TENSORPIPE rpc backend's registration (not on vNPU: it raises)."""

from torch_npu.distributed.rpc._unsupported import unsupported

__all__ = []


def _npu_tensorpipe_construct_rpc_backend_options_handler(*args, **kwargs):
    raise unsupported("NPU_TENSORPIPE rpc backend options")


def _npu_tensorpipe_init_backend_handler(*args, **kwargs):
    raise unsupported("the NPU_TENSORPIPE rpc backend")


def _rpc_backend_registry():
    raise unsupported("registering the NPU_TENSORPIPE rpc backend")
