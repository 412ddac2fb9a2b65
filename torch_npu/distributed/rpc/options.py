"""NPUTensorPipeRpcBackendOptions: TensorPipe's rpc options with npu devices.

torch's ``TensorPipeRpcBackendOptions`` accepts only CUDA devices in
``set_devices`` and its device maps; this class is the same C++ options
object (``_TensorPipeRpcBackendOptionsBase``, so torch's TensorPipe agent
takes it as it is) with the checks asking for npu devices instead. The
device maps say where a worker's npu tensors land on each peer
(``{"worker1": {"npu:0": "npu:1"}}``), and backward, where a peer's
replies land here; torch_npu/distributed/rpc/_npu_transfer.py applies them.
"""

from typing import Dict, List, Optional, Union

import torch
import torch.distributed.rpc.constants as rpc_constants
from torch._C import _get_privateuse1_backend_name
from torch._C._distributed_rpc import _TensorPipeRpcBackendOptionsBase

from torch_npu.utils._error_code import ErrCode, dist_error

__all__ = ["NPUTensorPipeRpcBackendOptions"]

DeviceType = Union[int, str, torch.device]


def _to_device(device: DeviceType) -> torch.device:
    """One device of ``set_devices``: it must be an npu."""
    device = torch.device(device)
    npu = _get_privateuse1_backend_name()
    if device.type != npu:
        raise ValueError(f"`set_devices` expect a list of {npu} devices, but got device type {device.type}."
                         + dist_error(ErrCode.VALUE))
    return device


def _to_device_map(device_map: Dict[DeviceType, DeviceType]) -> Dict[torch.device, torch.device]:
    """A device map as torch.devices; two sources may not share a target."""
    mapped: Dict[torch.device, torch.device] = {}
    source_of: Dict[torch.device, torch.device] = {}
    for source, target in device_map.items():
        source, target = torch.device(source), torch.device(target)
        if target in source_of:
            raise ValueError(f"`device_map` only supports 1-to-1 mapping, trying to map {source} and "
                             f"{source_of[target]} to {target}" + dist_error(ErrCode.VALUE))
        mapped[source] = target
        source_of[target] = source
    return mapped


def _to_device_list(devices: List[DeviceType]) -> List[torch.device]:
    return [_to_device(d) for d in devices]


class NPUTensorPipeRpcBackendOptions(_TensorPipeRpcBackendOptionsBase):
    """Options of the ``NPU_TENSORPIPE`` rpc backend.

    Args are TensorPipeRpcBackendOptions' (keyword-only): num_worker_threads,
    rpc_timeout (seconds), init_method, device_maps ({worker: {local npu:
    remote npu}}), devices (the npus this worker's agent uses; by default
    those its device maps and its peers' name), _transports, _channels."""

    def __init__(self, *, num_worker_threads: int = rpc_constants.DEFAULT_NUM_WORKER_THREADS,
                 rpc_timeout: float = rpc_constants.DEFAULT_RPC_TIMEOUT_SEC,
                 init_method: str = rpc_constants.DEFAULT_INIT_METHOD,
                 device_maps: Optional[Dict[str, Dict[DeviceType, DeviceType]]] = None,
                 devices: Optional[List[DeviceType]] = None, _transports: Optional[List] = None,
                 _channels: Optional[List] = None):
        maps = {worker: _to_device_map(m) for worker, m in (device_maps or {}).items()}
        super().__init__(num_worker_threads, _transports, _channels, rpc_timeout, init_method, maps,
                         _to_device_list(devices or []))

    def set_device_map(self, to: str, device_map: Dict[DeviceType, DeviceType]):
        """Adds ``device_map`` to the map for worker ``to``; an npu already
        mapped there may not be mapped elsewhere."""
        new = _to_device_map(device_map)
        current = super().device_maps.get(to, {})
        for source, target in new.items():
            if source in current and current[source] != target:
                raise ValueError(f"`set_device_map` only supports 1-to-1 mapping, trying to map {source} to "
                                 f"{target} and {current[source]}" + dist_error(ErrCode.VALUE))
        super()._set_device_map(to, new)

    def set_devices(self, devices: List[DeviceType]):
        """The npus this worker's agent uses."""
        self.devices = _to_device_list(devices)
