"""torch_npu.multiprocessing: how tensors cross process boundaries on vNPU.

``reductions``: an npu tensor put on a ``torch.multiprocessing`` queue travels
as an IPC handle of its storage, as a CUDA tensor does (it needs the sender's
device memory in vNPU's shared arena: VNPU_SHARED_DEVICE_MEMORY=1).
``_exit``: a child process waits at exit until the file descriptors of the
CPU tensors it put on queues were fetched. ``import torch_npu`` installs both.
"""

from torch_npu.multiprocessing import _exit, reductions  # noqa: F401
