"""torch_npu.distributed.rpc: the NPU_TENSORPIPE rpc backend.

``rpc.init_rpc(name, rank=r, world_size=n, backend=rpc.BackendType.NPU_TENSORPIPE,
rpc_backend_options=NPUTensorPipeRpcBackendOptions(device_maps={"worker1": {"npu:0": "npu:1"}}))``
runs torch.distributed.rpc (rpc_sync, rpc_async, remote, RRefs, RemoteModule,
distributed autograd) with npu tensors in arguments and results, placed on
peers by the device maps as TensorPipe places CUDA tensors
(backend_registry.py, _npu_transfer.py).
"""

import torch.distributed.rpc as rpc

__all__ = []

if rpc.is_available():
    from torch_npu.distributed.rpc import backend_registry, options  # noqa: F401
    from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions  # noqa: F401
