"""torch_npu.distributed: the "hccl" backend of torch.distributed for npu tensors.

``dist.init_process_group("hccl")`` (or no backend, with npu tensors) creates
a ``torch_npu._C._distributed_c10d.ProcessGroupHCCL`` per group: collectives
run on a communication stream of the tensors' device, in order with the npu
kernels queued before them (csrc/distributed/process_group_hccl.h). Facts and
messages follow real torch_npu's (shared TORCH_NPU_REFERENCE.md, "HCCL").
"""

import os
import re

import torch
import torch.distributed as dist

from torch_npu import _C

ProcessGroupHCCL = _C._distributed_c10d.ProcessGroupHCCL

# torch_npu's name for the PREMUL_SUM reduction (a sum of each rank's tensor
# times a factor), which HCCL runs as torch.distributed builds it for NCCL.
_make_hccl_premul_sum = dist._make_nccl_premul_sum


def _is_support_hccl_comm_name():
    """Whether process groups can be given communicator names
    (``_set_hccl_comm_name``): always, on vNPU (real torch_npu asks its CANN)."""
    return True


def _create_hccl(backend_options, pg_options):
    """The creator torch.distributed calls (extended API) for each hccl group."""
    options = pg_options if pg_options is not None else ProcessGroupHCCL.Options()
    if not isinstance(options, ProcessGroupHCCL.Options):
        raise TypeError(f"pg_options for the hccl backend should be ProcessGroupHCCL.Options, got "
                        f"{type(options).__name__}")
    options._timeout = backend_options.timeout
    options.global_ranks_in_group = list(backend_options.global_ranks_in_group)
    options.group_id = str(backend_options.group_id)
    host = os.environ.get("VNPU_HCCL_HOST")
    if host:
        options._host_id = _host_identity(host, dist.get_rank() if dist.is_initialized() else
                                          int(os.environ.get("RANK", "0")))
    return ProcessGroupHCCL(backend_options.store, backend_options.group_rank, backend_options.group_size, options)


def _host_identity(pattern, rank):
    """VNPU_HCCL_HOST for `rank` (its global rank): ranks with the same identity
    share memory. "{rank}" stands for the rank (every rank a host of its own),
    "{rank//K}" for rank // K (hosts of K ranks each)."""
    def substitute(match):
        return str(rank // int(match.group(1)) if match.group(1) else rank)
    identity = re.sub(r"\{rank(?://([1-9][0-9]*))?\}", substitute, pattern)
    if "{" in identity or "}" in identity:
        raise ValueError(f"VNPU_HCCL_HOST={pattern!r}: only {{rank}} and {{rank//K}} (K > 0) may be substituted")
    return identity


from torch_npu.distributed.parallel_store import ParallelStore  # noqa: E402

# Where real torch_npu binds it (its C++ store) and re-exports it.
_C._distributed_c10d.ParallelStore = ParallelStore

from torch_npu.distributed.distributed_c10d import (  # noqa: E402
    _all_gather_into_tensor_uneven as all_gather_into_tensor_uneven,
    _reduce_scatter_tensor_uneven as reduce_scatter_tensor_uneven,
    is_hccl_available,
    reinit_process_group,
)


def is_available():
    """torch.distributed works with npu tensors (the hccl backend)."""
    return dist.is_available()


def _parallel_url_rendezvous(url, *args, **kwargs):
    """``parallel://host:port?rank=R&world_size=W`` (torch.distributed.rendezvous), registered at
    ``import torch_npu`` as in real torch_npu; its module (which loads torchelastic's rendezvous
    API, 16 ms) is imported at the first such URL."""
    from torch_npu.distributed import rendezvous
    return rendezvous._parallel_rendezvous_handler(url, *args, **kwargs)


def register():
    """Registers "hccl" (npu's default backend) and the "parallel://" rendezvous with torch.distributed, once."""
    if "hccl" in dist.Backend.backend_list:
        return
    dist.Backend.register_backend("hccl", _create_hccl, extended_api=True, devices=["npu"])
    dist.is_hccl_available = is_hccl_available
    dist.reinit_process_group = reinit_process_group  # as torch_npu's distributed patches
    from torch.distributed.rendezvous import register_rendezvous_handler
    try:
        register_rendezvous_handler("parallel", _parallel_url_rendezvous)
    except RuntimeError:  # already registered (torch_npu.distributed.rendezvous, imported first)
        pass
