"""The "parallel" rendezvous of torch_npu.distributed.

Real torch_npu backs it with ParallelStore, its own multi-threaded TCP store
(with an optional per-node proxy tier). vNPU's ParallelStore is torch's
TCPStore under that API (parallel_store.py): both forms below use one
(multi-tenant, hosted by node 0's agent or by rank 0), which speaks the same
Store API, so jobs behave the same, only without the proxy tier (``--enable_tiered_parallel_tcpstore`` is accepted and
recorded in ENABLE_TIERED_PARALLEL_TCPSTORE, with no effect).

* ``init_process_group(init_method="parallel://host:port?rank=R&world_size=W")``
* the elastic handler ``--rdzv_backend=parallel`` (what
  ``python -m torch_npu.distributed.run`` selects): a static rendezvous of
  ``nnodes`` agents whose store the workers reuse (TORCHELASTIC_USE_AGENT_STORE).
"""

import logging
import os
from datetime import timedelta
from urllib.parse import urlparse

from torch.distributed import PrefixStore
from torch.distributed.constants import default_pg_timeout
from torch.distributed.elastic.rendezvous.api import (
    RendezvousHandler,
    RendezvousInfo,
    RendezvousParameters,
    RendezvousStoreInfo,
    rendezvous_handler_registry,
)
from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint
from torch.distributed.rendezvous import register_rendezvous_handler

from torch_npu.distributed.parallel_store import ParallelStore

__all__ = []

log = logging.getLogger(__name__)

_DEFAULT_TIMEOUT_S = 600


def _rendezvous_error(msg):
    return ValueError("Error initializing torch_npu.distributed using parallel:// rendezvous: " + msg)


def _torchelastic_use_agent_store():
    """Whether workers reuse their torchelastic agent's store (torch's
    TORCHELASTIC_USE_AGENT_STORE, or torch_npu's TORCH_NPU_ELASTIC_USE_AGENT_STORE)."""
    return os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" or \
        os.environ.get("TORCH_NPU_ELASTIC_USE_AGENT_STORE") == "True"


def _create_c10d_store(host, port, rank, world_size, timeout):
    """The store of a worker: a client of its agent's store under torchelastic
    (one prefix per restart attempt), else hosted by rank 0."""
    if not 0 <= port < 2 ** 16:
        raise ValueError(f"port must have value from 0 to 65535 but was {port}.")
    if _torchelastic_use_agent_store():
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        client = ParallelStore(host, port, world_size, is_server=False, timeout=timeout, multi_tenant=True)
        return PrefixStore(f"/worker/attempt_{attempt}", client)
    return ParallelStore(host, port, world_size, is_server=rank == 0, timeout=timeout, multi_tenant=True)


def _parallel_rendezvous_handler(url: str, timeout: timedelta = default_pg_timeout, **kwargs):
    result = urlparse(url)
    if not result.port:
        raise _rendezvous_error("port number missing")
    query = dict(pair.split("=", 1) for pair in filter(None, result.query.split("&")))
    if "rank" not in query:
        raise _rendezvous_error("rank parameter missing")
    if "world_size" not in query:
        raise _rendezvous_error("world size parameter missing")
    rank, world_size = int(query["rank"]), int(query["world_size"])
    store = _create_c10d_store(result.hostname, result.port, rank, world_size, timeout)
    yield (store, rank, world_size)
    raise RuntimeError("Unable to perform re-rendezvous using parallel:// method")


class _ParallelTCPRendezvous(RendezvousHandler):
    """Static rendezvous of ``world_size`` agents on a TCPStore hosted by agent 0."""

    def __init__(self, master_addr, master_port, rank, world_size, run_id, timeout):
        self.master_addr = master_addr
        self.master_port = master_port
        self.rank = rank
        self.world_size = world_size
        self.run_id = run_id
        self.timeout = timedelta(seconds=timeout)
        self._store = None

    def get_backend(self) -> str:
        return "parallel"

    @property
    def use_agent_store(self) -> bool:
        return True

    def next_rendezvous(self) -> RendezvousInfo:
        if self._store is None:
            log.info("Creating ParallelStore as the c10d::Store implementation")
            self._store = ParallelStore(self.master_addr, self.master_port, self.world_size,
                                        is_server=self.rank == 0, timeout=self.timeout, multi_tenant=True)
        return RendezvousInfo(PrefixStore(self.run_id, self._store), self.rank, self.world_size,
                              RendezvousStoreInfo(self.master_addr, self.master_port))

    def is_closed(self):
        return False

    def set_closed(self):
        pass

    def num_nodes_waiting(self):
        return 0

    def get_run_id(self) -> str:
        return self.run_id

    def shutdown(self) -> bool:
        return True


def _create_parallel_handler(params: RendezvousParameters) -> RendezvousHandler:
    if "rank" not in params.config:
        raise ValueError("rank is absent in RendezvousParameters. Launch with torch_npu.distributed.run and "
                         "--node_rank, or pass --rdzv_conf rank=<node rank>")
    endpoint = (params.endpoint or "").strip()
    if not endpoint:
        raise ValueError("endpoint is absent in RendezvousParameters. Try add --master_port and --master_addr "
                         "to the cmd request")
    master_addr, master_port = parse_rendezvous_endpoint(endpoint, -1)
    if master_port == -1:
        raise ValueError(f"Port is absent in endpoint: {endpoint}. Try launching with --master_port")
    timeout = int(params.config.get("timeout", _DEFAULT_TIMEOUT_S))
    os.environ.setdefault("TORCH_NPU_ELASTIC_USE_AGENT_STORE", "True")
    return _ParallelTCPRendezvous(master_addr, master_port, int(params.config["rank"]), params.max_nodes,
                                  params.run_id, timeout)


def _rendezvous_init():
    """Registers "parallel" with init_process_group's URL handlers and torchelastic's, once."""
    try:
        register_rendezvous_handler("parallel", _parallel_rendezvous_handler)
    except RuntimeError:  # already registered (at import torch_npu: a trampoline to the same handler)
        pass
    if "parallel" not in rendezvous_handler_registry._registry:
        rendezvous_handler_registry.register("parallel", _create_parallel_handler)


_rendezvous_init()
