"""torch_npu.distributed.tensor.experimental: context parallelism on npu.

``context_parallel`` is torch's, with the npu ring attention that
``_context_parallel`` adds to it (docs/distributed.md, "Context parallelism").
"""

import functools

from torch_npu.distributed.tensor.experimental._context_parallel import context_parallel as _torch_context_parallel


# torch's function (its context manager), under this module's name as real
# torch_npu's public one: a wrapper, so torch's own keeps reporting torch's module.
@functools.wraps(_torch_context_parallel)
def context_parallel(*args, **kwargs):
    return _torch_context_parallel(*args, **kwargs)


context_parallel.__module__ = __name__

__all__ = ["context_parallel"]
