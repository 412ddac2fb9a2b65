"""torch_npu.multiprocessing: how npu tensors cross process boundaries.

Real torch_npu shares an npu tensor put on a ``torch.multiprocessing`` queue
through an IPC handle to its device memory (``reductions``). A virtual NPU's
memory belongs to the process that allocated it, so there is nothing to hand
over: vNPU's reducers refuse npu tensors, storages and events with a message
that says to send ``tensor.cpu()`` instead, and leave everything else to
torch's own reducers. ``import torch_npu`` installs them.
"""

from torch_npu.multiprocessing import _exit, reductions  # noqa: F401
