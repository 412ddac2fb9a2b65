"""torch_npu.distributed.rpc: the NPU TensorPipe RPC backend (not on vNPU).

Real torch_npu registers an "NPU_TENSORPIPE" backend whose device maps move
npu tensors between workers over TensorPipe's device channels. vNPU has no
TensorPipe channel for npu memory, so the options class and the backend
registration raise RuntimeError; torch.distributed.rpc itself (CPU tensors,
the TENSORPIPE backend) is untouched.
"""

from torch_npu.distributed.rpc import backend_registry, options  # noqa: F401
from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions  # noqa: F401

__all__ = []
