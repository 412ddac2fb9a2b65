"""The ``NPU_TENSORPIPE`` rpc backend: torch's TensorPipe agent, npu device maps.

``_rpc_backend_registry()`` (run at ``import torch_npu``) adds
``NPU_TENSORPIPE`` to ``torch.distributed.rpc.BackendType``. Its agent,
``torch_npu._C._distributed_rpc.TensorPipeAgent``, is torch's TensorPipe
agent with the npu tensors of every message (arguments, results, RRef
values, gradients) sent as CPU copies that land on the npus the device maps
name (Note [npu tensors over TensorPipe], csrc/distributed/npu_tensorpipe_agent.h;
Python calls: _npu_transfer.py).

Joining a group has two forms, as TENSORPIPE's:

* static (``world_size`` given): every worker gathers every other worker's
  device maps over a gloo group, checks them, and starts its agent;
* dynamic (no ``world_size``): the joining worker starts its agent first,
  asks each member for its device maps over rpc, checks them, and tells each
  member about itself.

The checks are TensorPipe's (its messages, word for word), except that a
worker's device count is a dict per device type ({"npu": 8}) where torch
keeps one CUDA number. torch's own helpers build the reverse maps and the
device lists; the parts that only differ in names are torch's functions.
"""

from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc
from torch._C import _get_privateuse1_backend_name
from torch.distributed.rpc import api
from torch.distributed.rpc import backend_registry as torch_registry
from torch.distributed.rpc import constants as rpc_constants

from torch_npu.utils._error_code import ErrCode, dist_error

__all__ = []

# Backend-neutral pieces of torch's registry, under the names torch_npu has.
_backend_type_repr = torch_registry._backend_type_repr
_construct_rpc_backend_options = torch_registry.construct_rpc_backend_options
_init_backend = torch_registry.init_backend


# ---------------------------------------------------------------- this worker's devices

def _get_device_count_info():
    """How many devices of each non-CPU type this process sees: {"npu": n}, or {} without an npu module."""
    backend = _get_privateuse1_backend_name()
    device_module = getattr(torch, backend, None)
    if device_module is None:
        return {}
    return {backend: device_module.device_count()}


def _init_device_state(device_type):
    """Brings up ``device_type``'s runtime now: a peer may send tensors for
    these devices before this process's own code first touches them."""
    device_module = getattr(torch, device_type, None)
    if device_module is not None and device_module.is_available():
        device_module.init()


class _WorkerDevices(NamedTuple):
    """What one worker declares: the checks and the reverse maps are made of these."""
    name: str
    device_count: dict   # {device type: count}
    device_maps: dict    # {peer name: {own device: peer's device}}
    devices: list        # the devices its options list ([] = derive from the maps)


def _own_devices(agent):
    """(device count, device maps, devices) of the worker ``agent`` runs."""
    options = agent._get_backend_options()
    return _get_device_count_info(), options.device_maps, options.devices


def _get_device_infos():
    """Run on a member by a worker joining a dynamic group: what this member declares."""
    count, device_maps, devices = _own_devices(api._get_current_rpc_agent())
    if devices:
        _init_device_state(devices[0].type)
    return count, device_maps, devices


# ---------------------------------------------------------------- checking a group's device maps

def _device_exists(device, device_count):
    if device.type == "cpu":
        return True
    return device.index is not None and 0 <= device.index < device_count.get(device.type, 0)


def _tensorpipe_validate_devices(devices, device_count):
    """True when each device is the CPU or one of the ``device_count[type]`` devices of its type."""
    return all(_device_exists(device, device_count) for device in devices)


def _device_list_problem(node, devices, device_count):
    if len(set(devices)) < len(devices):
        return f"Node {node} has duplicated devices\ndevices = {devices}"
    if not _tensorpipe_validate_devices(devices, device_count):
        return f"Node {node} has devices with invalid indices\ndevices = {devices}\ndevice count = {device_count}"
    return None


def _map_end_problem(source, target, device_map, end, all_device_counts, all_devices):
    """Whether one end ("source": the map's keys, on ``source``; "target": its
    values, on ``target``) names devices its worker has. A worker that lists
    its devices must list these; one that lists none must merely own them;
    a dynamic group's target that has not joined yet is not checked."""
    owner, mapped = (source, device_map.keys()) if end == "source" else (target, device_map.values())
    where = f"in its device map for {target}\ndevice map = {device_map}"
    listed = all_devices.get(owner)
    if listed:
        if not set(mapped) <= set(listed):
            return f"Node {source} has unexpected {end} devices {where}\ndevices = {listed}"
    elif owner in all_device_counts and not _tensorpipe_validate_devices(mapped, all_device_counts[owner]):
        return f"Node {source} has {end} devices with invalid indices {where}\ndevice count = {all_device_counts[owner]}"
    return None


def _device_map_problems(all_names, all_device_counts, all_device_maps, all_devices, is_static_group):
    """Yields what is wrong, in TensorPipe's order: each worker's device list
    first, then each worker's maps, peer by peer."""
    for node in all_names:
        yield _device_list_problem(node, all_devices[node], all_device_counts[node])
    for source in all_names:
        maps = all_device_maps[source]
        if is_static_group and not set(maps) <= set(all_names):
            yield (f"Node {source} has invalid target node names in its device maps\n"
                   f"device maps = {maps.keys()}\nnode names = {all_names}")
        for target, device_map in maps.items():
            if len(set(device_map.values())) < len(device_map):
                yield f"Node {source} has duplicated target devices in its device map for {target}\n" \
                      f"device map = {device_map}"
            for end in ("source", "target"):
                yield _map_end_problem(source, target, device_map, end, all_device_counts, all_devices)


def _validate_device_maps(all_names, all_device_counts, all_device_maps, all_devices, is_static_group=True):
    """Raises ValueError naming the first worker whose device list or device
    maps no TensorPipe agent could honour."""
    problems = _device_map_problems(all_names, all_device_counts, all_device_maps, all_devices, is_static_group)
    first = next((problem for problem in problems if problem), None)
    if first is not None:
        raise ValueError(first + dist_error(ErrCode.VALUE))


def _reverse_maps_of_checked_group(my_name, workers, is_static_group):
    """Checks the group's declarations; returns, for each peer that maps
    devices to ``my_name``, that map inverted (where replies go back)."""
    names = [worker.name for worker in workers]
    device_maps = {worker.name: worker.device_maps for worker in workers}
    _validate_device_maps(names, {worker.name: worker.device_count for worker in workers}, device_maps,
                          {worker.name: worker.devices for worker in workers}, is_static_group)
    return torch_registry._create_reverse_mapping(my_name, names, device_maps)


# ---------------------------------------------------------------- joining a group

def _tensorpipe_exchange_and_check_all_device_maps(my_name, my_device_count, my_device_maps, my_devices, group):
    """Static group: all-gathers every worker's declaration over ``group``
    and checks them; returns this worker's reverse maps and the devices its
    agent serves."""
    declarations = [None] * group.size()
    dist.all_gather_object(declarations, (my_name, my_device_count, my_device_maps, my_devices), group)
    workers = [_WorkerDevices(*declared) for declared in declarations]
    reverse_device_maps = _reverse_maps_of_checked_group(my_name, workers, is_static_group=True)
    served = torch_registry._create_device_list(my_devices, my_device_maps, reverse_device_maps)
    return reverse_device_maps, served


def _set_devices_and_reverse_device_map(agent):
    """Dynamic group: ``agent`` has joined; collects every member's
    declaration (its own locally), checks them, and updates each member's
    view of the group with the newcomer."""
    me = agent.get_worker_info()
    workers = []
    for info in agent.get_worker_infos():
        declared = _own_devices(agent) if info.name == me.name else api.rpc_sync(info.name, _get_device_infos)
        workers.append(_WorkerDevices(info.name, *declared))
    _reverse_maps_of_checked_group(me.name, workers, is_static_group=False)
    for worker in workers:
        # Each member learns of the newcomer without devices: torch's agent
        # handles CUDA devices, and given npu ones it tracks the streams of
        # every reply's Python value, which fails on such a value ("Cannot
        # inspect value of type Capsule"). The npu tensors are placed by
        # vNPU's agent and pickler from the senders' own maps (Note [npu
        # tensors over TensorPipe]), as in a static group, whose agents are
        # started without devices too.
        api.rpc_sync(worker.name, torch_registry._update_group_membership, args=(me, [], {}, True))


def _start_agent(store, name, rank, world_size, rpc_backend_options):
    """Makes this process's agent the current one, its device maps
    governing the npu tensors Python calls send."""
    from torch_npu._C._distributed_rpc import TensorPipeAgent
    from torch_npu.distributed.rpc import _npu_transfer

    agent = TensorPipeAgent(store, name, rank, world_size, rpc_backend_options)
    api._init_rpc_states(agent)
    _npu_transfer.activate(agent)
    return agent


def _join_static_group(store, name, rank, world_size, options):
    # The agent's join has to behave as a barrier over every worker, which a
    # gloo group gives (as TENSORPIPE uses one).
    group = torch_registry._init_process_group(store, rank, world_size)
    _, served = _tensorpipe_exchange_and_check_all_device_maps(
        name, _get_device_count_info(), options.device_maps, options.devices, group)
    if served:
        _init_device_state(served[0].type)
    agent = _start_agent(store, name, rank, world_size, options)
    # A first round of rpc opens the channels: a worker that sends nothing
    # before shutdown would otherwise time out there. The barrier holds the
    # peers until rank 0 has finished that round.
    api._all_gather(None, timeout=options.rpc_timeout)
    group.barrier().wait()
    return agent


def _join_dynamic_group(store, name, rank, world_size, options):
    with torch_registry._group_membership_management(store, name, True):
        agent = _start_agent(store, name, rank, world_size, options)
        try:
            _set_devices_and_reverse_device_map(agent)
        except Exception:
            api.shutdown()  # members must not keep a half-joined worker
            raise
        return agent


def _npu_tensorpipe_init_backend_handler(store, name, rank, world_size, rpc_backend_options):
    """init_rpc's handler for NPU_TENSORPIPE: this worker's agent, started once its group's device maps check out."""
    from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions

    if not isinstance(store, dist.Store):
        raise TypeError(f"`store` must be a c10d::Store. {store}" + dist_error(ErrCode.TYPE))
    if not isinstance(rpc_backend_options, NPUTensorPipeRpcBackendOptions):
        raise TypeError(f"`rpc_backend_options` must be a `NPUTensorPipeRpcBackendOptions`. {rpc_backend_options}"
                        + dist_error(ErrCode.TYPE))
    if world_size:
        return _join_static_group(store, name, rank, world_size, rpc_backend_options)
    return _join_dynamic_group(store, name, rank, world_size, rpc_backend_options)


def _npu_tensorpipe_construct_rpc_backend_options_handler(
        rpc_timeout, init_method, num_worker_threads=rpc_constants.DEFAULT_NUM_WORKER_THREADS, _transports=None,
        _channels=None, **kwargs):
    """The options of ``init_rpc(backend=NPU_TENSORPIPE)`` without ``rpc_backend_options``."""
    from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions
    return NPUTensorPipeRpcBackendOptions(rpc_timeout=rpc_timeout, init_method=init_method,
                                          num_worker_threads=num_worker_threads, _transports=_transports,
                                          _channels=_channels)


def _rpc_backend_registry():
    """Adds NPU_TENSORPIPE to torch.distributed.rpc's backends (idempotent)."""
    if not rpc.is_available():
        return
    if not torch_registry.backend_registered("NPU_TENSORPIPE"):
        torch_registry.register_backend("NPU_TENSORPIPE", _npu_tensorpipe_construct_rpc_backend_options_handler,
                                        _npu_tensorpipe_init_backend_handler)
    # register_backend builds a new enum class; rpc's re-export still names the old one.
    rpc.BackendType = torch_registry.BackendType
