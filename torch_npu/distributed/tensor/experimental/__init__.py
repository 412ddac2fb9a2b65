"""torch_npu.distributed.tensor.experimental: context parallelism on npu.

``context_parallel`` is torch's, with the npu ring attention that
``_context_parallel`` adds to it (docs/distributed.md, "Context parallelism").
"""

from torch_npu.distributed.tensor.experimental._context_parallel import context_parallel

__all__ = ["context_parallel"]
