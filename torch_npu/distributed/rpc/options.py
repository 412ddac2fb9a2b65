"""NPUTensorPipeRpcBackendOptions (not on vNPU: constructing one raises)."""

from torch_npu.distributed.rpc._unsupported import unsupported

__all__ = ["NPUTensorPipeRpcBackendOptions"]


class NPUTensorPipeRpcBackendOptions:
    """TensorPipe rpc options with npu device maps; vNPU cannot honour them."""

    def __init__(self, *args, **kwargs):
        raise unsupported("NPUTensorPipeRpcBackendOptions")

    def set_device_map(self, to, device_map):
        raise unsupported("NPUTensorPipeRpcBackendOptions.set_device_map")

    def set_devices(self, devices):
        raise unsupported("NPUTensorPipeRpcBackendOptions.set_devices")
