"""The ``NPU_TENSORPIPE`` rpc backend: torch's TensorPipe agent, npu device maps.

``_rpc_backend_registry()`` (run at ``import torch_npu``) adds
``NPU_TENSORPIPE`` to ``torch.distributed.rpc.BackendType``. Its agent,
``torch_npu._C._distributed_rpc.TensorPipeAgent``, is torch's TensorPipe
agent with the npu tensors of every message (arguments, results, RRef
values, gradients) sent as CPU copies that land on the npus the device maps
name (Note [npu tensors over TensorPipe], csrc/distributed/npu_tensorpipe_agent.h;
Python calls: _npu_transfer.py).

The checks of the exchanged device maps are TensorPipe's, with device counts
per device type ({"npu": 8}) instead of CUDA's one number.
"""

from typing import cast

import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc
from torch._C import _get_privateuse1_backend_name
from torch.distributed.rpc import api
from torch.distributed.rpc import backend_registry as torch_registry
from torch.distributed.rpc import constants as rpc_constants

from torch_npu.utils._error_code import ErrCode, dist_error

__all__ = []


def _get_device_count_info():
    """{device type: count} of the devices this process has besides the CPU."""
    npu = _get_privateuse1_backend_name()
    module = getattr(torch, npu, None)
    return {npu: module.device_count()} if module is not None else {}


def _init_device_state(device_type):
    """Initialises the device type's runtime before a peer's tensors can arrive."""
    module = getattr(torch, device_type, None)
    if module is not None and module.is_available():
        module.init()


def _tensorpipe_validate_devices(devices, device_count):
    """Whether every device is the CPU or an existing device of its type."""
    return all(d.type == "cpu" or (d.index is not None and 0 <= d.index < device_count.get(d.type, 0))
               for d in devices)


def _invalid(message):
    return ValueError(message + dist_error(ErrCode.VALUE))


def _validate_device_maps(all_names, all_device_counts, all_device_maps, all_devices, is_static_group=True):
    """Refuses device lists and maps no TensorPipe agent could honour, naming
    the worker and what is wrong (torch's messages)."""
    for node in all_names:
        devices = all_devices[node]
        if len(set(devices)) != len(devices):
            raise _invalid(f"Node {node} has duplicated devices\ndevices = {devices}")
        if not _tensorpipe_validate_devices(devices, all_device_counts[node]):
            raise _invalid(f"Node {node} has devices with invalid indices\ndevices = {devices}\n"
                           f"device count = {all_device_counts[node]}")
    for source in all_names:
        # a dynamic group's targets may not have joined yet
        if is_static_group and not set(all_device_maps[source]).issubset(all_names):
            raise _invalid(f"Node {source} has invalid target node names in its device maps\n"
                           f"device maps = {all_device_maps[source].keys()}\nnode names = {all_names}")
        for target, device_map in all_device_maps[source].items():
            where = f"in its device map for {target}\ndevice map = {device_map}"
            if len(set(device_map.values())) != len(device_map):
                raise _invalid(f"Node {source} has duplicated target devices {where}")
            if all_devices[source]:
                if not set(device_map).issubset(all_devices[source]):
                    raise _invalid(f"Node {source} has unexpected source devices {where}\n"
                                   f"devices = {all_devices[source]}")
            elif not _tensorpipe_validate_devices(device_map.keys(), all_device_counts[source]):
                raise _invalid(f"Node {source} has source devices with invalid indices {where}\n"
                               f"device count = {all_device_counts[source]}")
            if all_devices.get(target):
                if not set(device_map.values()).issubset(all_devices[target]):
                    raise _invalid(f"Node {source} has unexpected target devices {where}\n"
                                   f"devices = {all_devices[target]}")
            elif target in all_device_counts and not _tensorpipe_validate_devices(
                    device_map.values(), all_device_counts[target]):
                raise _invalid(f"Node {source} has target devices with invalid indices {where}\n"
                               f"device count = {all_device_counts[target]}")


def _get_device_infos():
    """(device counts, device maps, devices) of this worker, for a peer joining a dynamic group."""
    from torch_npu._C._distributed_rpc import TensorPipeAgent
    agent = cast(TensorPipeAgent, api._get_current_rpc_agent())
    options = agent._get_backend_options()
    if options.devices:
        _init_device_state(options.devices[0].type)
    return _get_device_count_info(), options.device_maps, options.devices


def _tensorpipe_exchange_and_check_all_device_maps(my_name, my_device_count, my_device_maps, my_devices, group):
    """Gathers every worker's device maps over ``group``, checks them, and
    returns this worker's reverse maps and the devices its agent uses."""
    gathered = [("", {}, {}, []) for _ in range(group.size())]
    dist.all_gather_object(gathered, (my_name, my_device_count, my_device_maps, my_devices), group)
    names = [name for name, _, _, _ in gathered]
    counts = {name: count for name, count, _, _ in gathered}
    maps = {name: device_map for name, _, device_map, _ in gathered}
    devices = {name: device_list for name, _, _, device_list in gathered}
    _validate_device_maps(names, counts, maps, devices)
    reverse_device_maps = torch_registry._create_reverse_mapping(my_name, names, maps)
    return reverse_device_maps, torch_registry._create_device_list(my_devices, my_device_maps, reverse_device_maps)


def _set_devices_and_reverse_device_map(agent):
    """A worker joining a dynamic group: checks its device maps against the
    members' and tells each member its devices and reverse maps."""
    me = agent.get_worker_info()
    counts, maps, devices, names = {}, {}, {}, []
    for info in agent.get_worker_infos():
        if info.name == me.name:
            options = agent._get_backend_options()
            counts[info.name] = _get_device_count_info()
            maps[info.name], devices[info.name] = options.device_maps, options.devices
        else:
            counts[info.name], maps[info.name], devices[info.name] = api.rpc_sync(info.name, _get_device_infos)
        names.append(info.name)
    _validate_device_maps(names, counts, maps, devices, is_static_group=False)
    reverse_device_maps = torch_registry._create_reverse_mapping(me.name, names, maps)
    for name in names:
        devices[name] = torch_registry._create_device_list(devices[name], maps[name], reverse_device_maps)
        api.rpc_sync(name, torch_registry._update_group_membership,
                     args=(me, devices[name], reverse_device_maps, True))


def _backend_type_repr(self):
    return "BackendType." + self.name


def _construct_rpc_backend_options(backend, rpc_timeout=rpc_constants.DEFAULT_RPC_TIMEOUT_SEC,
                                   init_method=rpc_constants.DEFAULT_INIT_METHOD, **kwargs):
    return backend.value.construct_rpc_backend_options_handler(rpc_timeout, init_method, **kwargs)


def _init_backend(backend, *args, **kwargs):
    return backend.value.init_backend_handler(*args, **kwargs)


def _npu_tensorpipe_construct_rpc_backend_options_handler(
        rpc_timeout, init_method, num_worker_threads=rpc_constants.DEFAULT_NUM_WORKER_THREADS, _transports=None,
        _channels=None, **kwargs):
    """The options ``init_rpc(backend=NPU_TENSORPIPE)`` uses when given none."""
    from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions
    return NPUTensorPipeRpcBackendOptions(rpc_timeout=rpc_timeout, init_method=init_method,
                                          num_worker_threads=num_worker_threads, _transports=_transports,
                                          _channels=_channels)


def _npu_tensorpipe_init_backend_handler(store, name, rank, world_size, rpc_backend_options):
    """Starts this worker's agent once the device maps of all workers were
    checked (a static group), or tells the members of a dynamic group of it."""
    from torch_npu._C._distributed_rpc import TensorPipeAgent
    from torch_npu.distributed.rpc import _npu_transfer
    from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions

    if not isinstance(store, dist.Store):
        raise TypeError(f"`store` must be a c10d::Store. {store}" + dist_error(ErrCode.TYPE))
    if not isinstance(rpc_backend_options, NPUTensorPipeRpcBackendOptions):
        raise TypeError(f"`rpc_backend_options` must be a `NPUTensorPipeRpcBackendOptions`. {rpc_backend_options}"
                        + dist_error(ErrCode.TYPE))
    if not world_size:
        with torch_registry._group_membership_management(store, name, True):
            agent = TensorPipeAgent(store, name, rank, world_size, rpc_backend_options)
            api._init_rpc_states(agent)
            _npu_transfer.activate(agent)
            try:
                _set_devices_and_reverse_device_map(agent)
            except Exception:
                api.shutdown()
                raise
            return agent

    # The agent's join is a barrier over a process group, as TENSORPIPE's.
    group = torch_registry._init_process_group(store, rank, world_size)
    _, devices = _tensorpipe_exchange_and_check_all_device_maps(
        name, _get_device_count_info(), rpc_backend_options.device_maps, rpc_backend_options.devices, group)
    if devices:
        _init_device_state(devices[0].type)
    agent = TensorPipeAgent(store, name, rank, world_size, rpc_backend_options)
    api._init_rpc_states(agent)
    _npu_transfer.activate(agent)
    # One round of rpc opens the channels, so that shutdown does not time out
    # on a worker that sent nothing; the barrier keeps peers until rank 0 is done.
    api._all_gather(None, timeout=rpc_backend_options.rpc_timeout)
    group.barrier().wait()
    return agent


def _rpc_backend_registry():
    """Adds NPU_TENSORPIPE to torch.distributed.rpc's backends (once)."""
    if not rpc.is_available():
        return
    if "NPU_TENSORPIPE" not in torch_registry.BackendType.__members__:
        torch_registry.register_backend("NPU_TENSORPIPE", _npu_tensorpipe_construct_rpc_backend_options_handler,
                                        _npu_tensorpipe_init_backend_handler)
    # register_backend makes a new enum; rpc's own name for it must follow
    rpc.BackendType = torch_registry.BackendType
