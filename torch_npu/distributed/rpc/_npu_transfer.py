"""The npu tensors of Python rpc calls on the NPU_TENSORPIPE backend.

The agent (Note [npu tensors over TensorPipe], csrc/distributed/
npu_tensorpipe_agent.h) places the npu tensors of every message. The Python
calls are handled one step earlier, in rpc's Python pickler, because
distributed autograd attaches its "send" function to a message's tensors
after pickling and before the agent: a send function holding npu tensors
makes torch's distributed engine synchronise their streams as CUDA streams,
which fails on a build without CUDA. So the pickler sends each npu tensor
as a CPU copy (an autograd operation: gradients flow through it) tagged
with where it came from, and unpickling lands it:

- a request to worker W lands on ``device_maps[W][source device]``, which
  the sender resolves (a device with no mapping is refused before anything
  is sent, in TensorPipe's words);
- a reply lands where the caller's own map for the replying worker points
  back from the device it came from (TensorPipe's reverse map).

A request under distributed autograd is unpickled before torch attaches
its "recv" function to the CPU copies, so a copy made then would tie the
gradient to a tensor that is about to stop being a leaf: those arguments
are moved when the call runs (``_call_on_devices``).

While the backend is the current agent, every call, builtin operators
included, is sent as a Python call of ``_call_on_devices``; TorchScript
functions keep torch's C++ path, where the agent places npu tensors
(without distributed autograd of npu tensors).
"""

import functools
import threading

import torch
from torch._C import _get_privateuse1_backend_name
from torch.distributed.rpc import api, internal
from torch.distributed.rpc.constants import UNSET_RPC_TIMEOUT

__all__ = []

_HINT = ("TensorPipe RPC backend only supports CPU tensors by default, please move your tensors to CPU before "
         "sending them over RPC, or call `set_device_map` on `NPUTensorPipeRpcBackendOptions` to explicitly "
         "configure device mapping.")


class _State:
    agent = None        # the NPU_TENSORPIPE agent of this process
    name = None         # this worker's name
    device_maps = {}    # {peer: {local device: peer's device}}, this worker's options
    installed = False


_destination = threading.local()  # .name: the worker a request being pickled goes to
_pending = {}  # id(CPU tensor) -> (tensor, target): request arguments their call moves to their npu
_pending_lock = threading.Lock()


def activate(agent):
    """Makes ``agent``'s device maps govern the npu tensors Python rpc calls send."""
    _State.agent = agent
    _State.name = agent.get_worker_info().name
    _State.device_maps = dict(agent._get_backend_options().device_maps)
    if not _State.installed:
        _install()
        _State.installed = True


def _active():
    if _State.agent is None or not torch._C._distributed_rpc._is_current_rpc_agent_set():
        return False
    return api._get_current_rpc_agent() is _State.agent


# --- pickling -------------------------------------------------------------------------

def _request_target(device, destination):
    device_map = _State.device_maps.get(destination)
    if device_map is None:
        raise RuntimeError(f"{_HINT} Request device mapping is not available for destination {destination}, but "
                           f"found tensor on device: {device}")
    if device not in device_map:
        raise RuntimeError(f"{_HINT} Request device mapping is not available for destination {destination} for "
                           f"device {device} but received a tensor on that device.")
    return str(device_map[device])


def _reply_target(source_worker, device):
    for local, remote in _State.device_maps.get(source_worker, {}).items():
        if remote == device:
            return local
    raise RuntimeError(f"{_HINT} Response device mapping is not available for destination {_State.name}: "
                       f"{source_worker} replied with a tensor on {device}, which no device of {_State.name} is "
                       f"mapped to in its device map for {source_worker}")


_reduce_cpu_tensor = internal._internal_rpc_pickler._tensor_reducer


def _reduce_tensor(tensor):
    if tensor.device.type != _get_privateuse1_backend_name() or not _active():
        return _reduce_cpu_tensor(tensor)
    destination = getattr(_destination, "name", None)
    target = _request_target(tensor.device, destination) if destination is not None else None
    _, (index,) = _reduce_cpu_tensor(tensor.cpu())
    return _receive_npu_tensor, (index, _State.name, str(tensor.device), target)


def _receive_npu_tensor(index, source_worker, source_device, target):
    """Unpickles an npu tensor: its CPU copy, moved to where it lands here
    (``target`` for a request, the reverse map for a reply)."""
    tensor = internal._InternalRPCPickler._tensor_receiver(index)
    if target is None:
        return tensor.to(_reply_target(source_worker, torch.device(source_device)))
    if tensor.requires_grad:
        with _pending_lock:
            _pending[id(tensor)] = (tensor, target)
        return tensor
    return tensor.to(target)


# --- calls ---------------------------------------------------------------------------------

def _call_on_devices(func, *args, **kwargs):
    """Runs a request's function on the callee, the arguments distributed
    autograd records first moved to their npus."""
    moved = {}  # a tensor passed twice is one argument, moved once

    def place(value):
        if isinstance(value, torch.Tensor):
            if id(value) in moved:
                return moved[id(value)]
            with _pending_lock:
                entry = _pending.pop(id(value), None)
            if entry is not None and entry[0] is value:
                moved[id(value)] = value.to(entry[1])
                return moved[id(value)]
        return value

    if _pending:
        args, kwargs = torch.utils._pytree.tree_map(place, (args, kwargs))
    return func(*args, **kwargs)


class _OnDevices:
    """A request's function as sent: called on the callee through
    ``_call_on_devices``; pickled as the function alone."""

    def __init__(self, func):
        self.func = func

    def __call__(self, *args, **kwargs):
        return _call_on_devices(self.func, *args, **kwargs)

    def __reduce__(self):
        return _OnDevices, (self.func,)

    @property
    def _wrapped_async_rpc_function(self):  # @rpc.functions.async_execution, as torch asks for it
        return self.func._wrapped_async_rpc_function


def _sendable(func):
    """``func`` as it is sent: TorchScript functions as they are, anything
    else (builtin operators included) as a Python call of ``_call_on_devices``."""
    if isinstance(func, torch.jit.ScriptFunction):
        return func
    # TorchScript's builtin table is keyed by id(), and a library that
    # redefines an operator leaves its old function's id behind: a call object
    # at that address would be sent as the operator, so it is made again (the
    # refused ones kept until then, so the address is not handed back).
    refused = []
    while True:
        call = _OnDevices(func)
        if torch.jit._builtins._find_builtin(call) is None:
            return call
        refused.append(call)


class _SendingTo:
    def __init__(self, to):
        self.name = api._to_worker_info(to).name

    def __enter__(self):
        self.outer = getattr(_destination, "name", None)
        _destination.name = self.name

    def __exit__(self, *exc):
        _destination.name = self.outer


def _install():
    invoke_rpc, remote = api._invoke_rpc, api.remote

    @functools.wraps(invoke_rpc)
    def _invoke_rpc(to, func, rpc_type, args=None, kwargs=None, rpc_timeout=UNSET_RPC_TIMEOUT):
        if not _active():
            return invoke_rpc(to, func, rpc_type, args, kwargs, rpc_timeout)
        with _SendingTo(to):
            return invoke_rpc(to, _sendable(func), rpc_type, args, kwargs, rpc_timeout)

    @functools.wraps(remote)
    def _remote(to, func, args=None, kwargs=None, timeout=UNSET_RPC_TIMEOUT):
        if not _active():
            return remote(to, func, args, kwargs, timeout)
        with _SendingTo(to):
            return remote(to, _sendable(func), args, kwargs, timeout)

    internal._internal_rpc_pickler._dispatch_table[torch.Tensor] = _reduce_tensor
    api._invoke_rpc = _invoke_rpc
    api.remote = _remote
    torch.distributed.rpc.remote = _remote
