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

Both are torch's counterparts (the tcp:// URL handler, the "static"
torchelastic handler) with a ParallelStore in place of the TCPStore.
"""

import logging
import os
from datetime import timedelta
from urllib.parse import urlparse

from torch.distributed import PrefixStore
from torch.distributed.constants import default_pg_timeout
from torch.distributed.elastic.rendezvous.api import RendezvousParameters, rendezvous_handler_registry
from torch.distributed.elastic.rendezvous.static_tcp_rendezvous import StaticTCPRendezvous
from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint
from torch.distributed.rendezvous import _query_to_dict, register_rendezvous_handler

from torch_npu.distributed.parallel_store import ParallelStore

__all__ = []

log = logging.getLogger(__name__)

# Either variable set to "True" makes workers clients of their agent's store:
# torch's name, and the one the "parallel" handler sets for its workers.
_AGENT_STORE_FLAGS = ("TORCHELASTIC_USE_AGENT_STORE", "TORCH_NPU_ELASTIC_USE_AGENT_STORE")

_AGENTS_TIMEOUT_S = 600  # how long agents wait for each other, unless --rdzv_conf timeout=... says


def _rendezvous_error(msg):
    return ValueError("Error initializing torch_npu.distributed using parallel:// rendezvous: " + msg)


def _torchelastic_use_agent_store():
    """Whether this worker was started by an agent whose store it must reuse."""
    return any(os.environ.get(flag) == "True" for flag in _AGENT_STORE_FLAGS)


def _create_c10d_store(host, port, rank, world_size, timeout):
    """A worker's store on ``host:port``. Under an agent the agent hosts it
    and every worker is a client, its keys under one prefix per restart (a
    restarted worker must not read its previous attempt's keys); otherwise
    rank 0 hosts it."""
    if port < 0 or port >= 1 << 16:
        raise ValueError(f"port must have value from 0 to 65535 but was {port}.")
    under_agent = _torchelastic_use_agent_store()
    store = ParallelStore(host, port, world_size, is_server=not under_agent and rank == 0, timeout=timeout,
                          multi_tenant=True)
    if not under_agent:
        return store
    return PrefixStore("/worker/attempt_" + os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"), store)


def _parse_parallel_url(url):
    """(host, port, rank, world size) of ``parallel://host:port?rank=R&world_size=W``."""
    parts = urlparse(url)
    query = _query_to_dict(parts.query)
    absent = [what for what, missing in (("port number", not parts.port),
                                         ("rank parameter", "rank" not in query),
                                         ("world size parameter", "world_size" not in query)) if missing]
    if absent:
        raise _rendezvous_error(absent[0] + " missing")
    return parts.hostname, parts.port, int(query["rank"]), int(query["world_size"])


def _parallel_rendezvous_handler(url: str, timeout: timedelta = default_pg_timeout, **kwargs):
    """init_process_group's handler for parallel:// URLs: one (store, rank, world size), and no second round."""
    host, port, rank, world_size = _parse_parallel_url(url)
    yield _create_c10d_store(host, port, rank, world_size, timeout), rank, world_size
    # A static configuration cannot be renegotiated.
    raise RuntimeError("Unable to perform re-rendezvous using parallel:// method")


class _ParallelStoreRendezvous(StaticTCPRendezvous):
    """torch's static rendezvous (``world_size`` agents, node 0 hosting the
    store, workers reusing it) on a ParallelStore."""

    def get_backend(self) -> str:
        return "parallel"

    def next_rendezvous(self):
        # torch's method makes a TCPStore only when it has no store yet: the
        # ParallelStore made here (a TCPStore on vNPU) serves every round.
        if self._store is None:
            log.info("Creating ParallelStore as the c10d::Store implementation")
            self._store = ParallelStore(self.master_addr, self.master_port, self.world_size,
                                        is_server=self.rank == 0, timeout=self.timeout, multi_tenant=True)
        return super().next_rendezvous()


def _agents_endpoint(params):
    """(host, port) of the agent 0 that hosts the store, from ``--rdzv_endpoint`` or the master's address."""
    endpoint = (params.endpoint or "").strip()
    if not endpoint:
        raise ValueError("endpoint is absent in RendezvousParameters. Try add --master_port and --master_addr "
                         "to the cmd request")
    host, port = parse_rendezvous_endpoint(endpoint, -1)
    if port == -1:
        raise ValueError(f"Port is absent in endpoint: {endpoint}. Try launching with --master_port")
    return host, port


def _create_parallel_handler(params: RendezvousParameters):
    """torchelastic's factory for ``--rdzv_backend=parallel``."""
    if "rank" not in params.config:
        raise ValueError("rank is absent in RendezvousParameters. Launch with torch_npu.distributed.run and "
                         "--node_rank, or pass --rdzv_conf rank=<node rank>")
    host, port = _agents_endpoint(params)
    # The workers this agent starts inherit the environment: they become clients of its store.
    os.environ.setdefault("TORCH_NPU_ELASTIC_USE_AGENT_STORE", "True")
    return _ParallelStoreRendezvous(host, port, int(params.config["rank"]), params.max_nodes, params.run_id,
                                    int(params.config.get("timeout", _AGENTS_TIMEOUT_S)))


def _rendezvous_init():
    """Registers "parallel" with init_process_group's URL handlers and with torchelastic's, once each."""
    try:
        register_rendezvous_handler("parallel", _parallel_rendezvous_handler)
    except RuntimeError:
        pass  # registered at ``import torch_npu``, by a trampoline to the same handler
    if "parallel" not in rendezvous_handler_registry._registry:
        rendezvous_handler_registry.register("parallel", _create_parallel_handler)


_rendezvous_init()
