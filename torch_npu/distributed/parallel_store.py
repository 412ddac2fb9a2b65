"""torch_npu's ParallelStore, on vNPU a TCPStore under real torch_npu's name
and constructor.

Real torch_npu's ParallelStore is its own c10d::Store: a multi-threaded,
epoll-based TCP server for thousands of ranks, with an optional per-node
proxy tier (``enable_tiered``: workers reach a proxy in their torchrun agent
over a Unix socket, the proxy reaches the server over TCP). The protocol a
user sees is the store API, which torch's TCPStore (libuv server) provides
with the same semantics at the scale one host runs. So vNPU's ParallelStore
is a TCPStore that takes ParallelStore's arguments:

- ``is_server`` / ``world_size`` / ``timeout`` / ``multi_tenant`` mean what
  TCPStore's ``is_master`` / ``world_size`` / ``timeout`` / ``multi_tenant``
  mean; ``wait_workers`` makes the server wait for the other users only in an
  agent's store (``agent_run``), as real ParallelStore does, so a worker's
  rank 0 hosting the store returns at once;
- ``agent_run``, ``agent_pid`` and ``enable_tiered`` choose the proxy tier:
  accepted and recorded (``store.enable_tiered``), without a proxy (every
  client talks TCP to the server, as with ``enable_tiered=False``).

One difference of protocol is made up for: TCPStore's ``set`` is not
acknowledged (the client goes on before the server applied it), while
ParallelStore's is, so a ``set`` here is followed by a round trip on the same
connection (``check``), after which any user of the store sees the key.
"""

from datetime import timedelta

from torch.distributed import TCPStore

__all__ = ["ParallelStore"]


def _as_timedelta(timeout):
    if isinstance(timeout, timedelta):
        return timeout
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        return timedelta(milliseconds=timeout)  # the C++ binding's unit
    raise TypeError(f"ParallelStore: timeout should be a datetime.timedelta (or milliseconds), got "
                    f"{type(timeout).__name__}")


class ParallelStore(TCPStore):
    """A TCP key-value store under torch_npu's ParallelStore API (see the module docstring)."""

    def __init__(self, host="127.0.0.1", port=29500, world_size=-1, agent_run=False, agent_pid=-1,
                 is_server=False, enable_tiered=False, timeout=timedelta(milliseconds=300000), wait_workers=True,
                 multi_tenant=False):
        if not isinstance(port, int) or not 0 <= port < 2 ** 16:
            raise ValueError(f"ParallelStore: port must have value from 0 to 65535 but was {port}.")
        if not isinstance(world_size, int) or world_size < -1:
            raise ValueError(f"ParallelStore: world_size should be -1 (not fixed) or the number of store users, got "
                             f"{world_size}")
        super().__init__(host, port, None if world_size < 0 else world_size, bool(is_server), _as_timedelta(timeout),
                         bool(wait_workers) and bool(agent_run), bool(multi_tenant))
        self.agent_run = bool(agent_run)
        self.agent_pid = int(agent_pid)
        self.enable_tiered = bool(enable_tiered)

    def set(self, key, value):
        super().set(key, value)
        self.check([key])  # answered after the set was applied: the set is acknowledged

    def multi_set(self, keys, values):
        super().multi_set(keys, values)
        if keys:
            self.check([keys[-1]])
