"""Printing and saving a tensor from inside an NPU graph: npu::print_npugraph_tensor
and npu::save_npugraph_tensor (torch_npu.print_npugraph_tensor, ...).

A graph replays kernels, not Python, so a plain ``print(x)`` in the captured
code shows the values of the capture only. These operators queue a host
function on the current stream instead: at that point of every replay (or of
the eager stream, outside a capture) it prints or saves the tensor's values
as they are then.

How the values reach the host function: torch_npu copies the tensor to the
host on a side stream and passes the host function a "pointer spec" of the
copy, (marker, address, bytes, shape, dtype), which it materialises into a
CPU tensor. vNPU's device memory is host memory, so the spec can point at the
npu tensor itself (a contiguous copy of it first, captured like any other
kernel, when it is strided): the host function runs in stream order, after
the kernels that wrote it, and reads the bytes there.

Saving builds the file name when the operator is called (captured), as
torch_npu does: ``<stem>_device_<i>_<n><suffix>`` with a counter per name,
or ``<stem>_device_<i><suffix>`` with ``overwrite=True``; by default
``tensor_<timestamp>.pt`` in the working directory.
"""

import ctypes
import os
import threading
from datetime import datetime

import torch
from torch.fx.node import has_side_effect

from torch_npu import _torch_library

_NPUGRAPH_TENSOR_PTR_SPEC_MARKER = "host_tensor_ptr"
_NPUGRAPH_TENSOR_BUFFER_SPEC_MARKER = "host_tensor_buffer"

_save_counters = {}
_save_counters_lock = threading.Lock()


def _make_npugraph_tensor_ptr_spec(tensor):
    """(marker, address, bytes, shape, dtype) of a contiguous tensor in host-visible memory."""
    return (_NPUGRAPH_TENSOR_PTR_SPEC_MARKER, tensor.data_ptr(), tensor.numel() * tensor.element_size(),
            tuple(tensor.shape), tensor.dtype)


def _materialize_npugraph_tensor_arg(tensor_arg):
    """A CPU tensor (or a list of them) holding the bytes a spec describes, copied."""
    if isinstance(tensor_arg, list):
        return [_materialize_npugraph_tensor_arg(arg) for arg in tensor_arg]
    if not isinstance(tensor_arg, tuple) or not tensor_arg:
        return tensor_arg
    if tensor_arg[0] == _NPUGRAPH_TENSOR_BUFFER_SPEC_MARKER and len(tensor_arg) == 4:
        _, buffer, shape, dtype = tensor_arg
    elif tensor_arg[0] == _NPUGRAPH_TENSOR_PTR_SPEC_MARKER and len(tensor_arg) == 5:
        _, address, nbytes, shape, dtype = tensor_arg
        buffer = bytearray((ctypes.c_char * nbytes).from_address(address)) if nbytes else bytearray()
    else:
        return tensor_arg
    if len(buffer) == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(buffer, dtype=dtype).reshape(shape)


def _build_save_npugraph_tensor_path(save_path=None, device_index=None, overwrite=False):
    if save_path is None:
        save_path = f"tensor_{datetime.now().strftime('%Y%m%d_%H%M%S_%f')}.pt"
    if not isinstance(save_path, str):
        raise TypeError(f"save_path must be str or None, but got {type(save_path).__name__}")
    if not isinstance(overwrite, bool):
        raise TypeError(f"overwrite must be bool, but got {type(overwrite).__name__}")
    directory, filename = os.path.split(save_path)
    stem, suffix = os.path.splitext(filename)
    if not stem:
        raise ValueError("save_path must include a file name")
    suffix = suffix or ".pt"
    if device_index is not None:
        stem = f"{stem}_device_{device_index}"
    if not overwrite:
        key = os.path.join(directory, stem + suffix)
        with _save_counters_lock:
            index = _save_counters.get(key, 0)
            _save_counters[key] = index + 1
        stem = f"{stem}_{index}"
    return os.path.join(directory, stem + suffix)


def _tensor_list_device(tensors):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"input must be Tensor or TensorList, but got {type(tensors).__name__}")
    if len(tensors) == 0:
        raise ValueError("input tensor list must not be empty")
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        raise TypeError("all elements in input tensor list must be Tensor")
    if any(t.device != tensors[0].device for t in tensors):
        raise ValueError("all tensors in input tensor list must be on the same device")
    return tensors[0].device


def _print(tensor_name, tensor):
    text = str(tensor) if tensor_name is None else f"{tensor_name}={tensor}"
    print(f"{text}, shape={tuple(tensor.shape)}, dtype={tensor.dtype}", flush=True)


def _print_callback(user_data):
    tensor_name, spec, _keep_alive = user_data
    _print(tensor_name, _materialize_npugraph_tensor_arg(spec))


def _save_callback(user_data):
    specs, path, _keep_alive = user_data
    torch.save(_materialize_npugraph_tensor_arg(specs), path)


def _on_stream(tensors, callback, make_user_data):
    """Queues callback on the current stream with pointer specs of contiguous
    versions of tensors (kept alive by the host function's arguments)."""
    staged = [t if t.is_contiguous() else t.contiguous() for t in tensors]
    specs = [_make_npugraph_tensor_ptr_spec(t) for t in staged]
    stream = torch.npu.current_stream(tensors[0].device)
    torch.npu._launch_host_func(stream, callback, make_user_data(specs, staged))


def _print_npugraph_tensor(input, *, tensor_name=None):
    if input.device.type not in ("cpu", "npu"):
        return
    if input.device.type == "cpu":
        _print(tensor_name, input)
        return
    _on_stream([input], _print_callback, lambda specs, staged: (tensor_name, specs[0], staged))


def _save_npugraph_tensor(input, *, save_path=None, overwrite=False):
    if input.device.type not in ("cpu", "npu"):
        return
    if input.device.type == "cpu":
        torch.save(input, _build_save_npugraph_tensor_path(save_path, overwrite=overwrite))
        return
    path = _build_save_npugraph_tensor_path(save_path, input.device.index, overwrite)
    _on_stream([input], _save_callback, lambda specs, staged: (specs[0], path, staged))


def _save_npugraph_tensor_list(input, *, save_path=None, overwrite=False):
    device = _tensor_list_device(input)
    if device.type not in ("cpu", "npu"):
        return
    if device.type == "cpu":
        torch.save(list(input), _build_save_npugraph_tensor_path(save_path, overwrite=overwrite))
        return
    path = _build_save_npugraph_tensor_path(save_path, device.index, overwrite)
    _on_stream(list(input), _save_callback, lambda specs, staged: (specs, path, staged))


def _define():
    lib = torch.library.Library("npu", "FRAGMENT")
    for schema in ("print_npugraph_tensor(Tensor input, *, str? tensor_name=None) -> ()",
                   "save_npugraph_tensor(Tensor input, *, str? save_path=None, bool overwrite=False) -> ()",
                   "save_npugraph_tensor.tensor_list(Tensor[] input, *, str? save_path=None, bool overwrite=False) -> ()"):
        _torch_library.define(lib, schema)  # TorchScript's builtin table kept exact
    # One kernel for every device (an empty list too, which has none): cpu
    # tensors are printed or saved at once, npu ones on their stream, and
    # meta / fake tensors (torch.compile's tracing) have nothing to show.
    lib.impl("print_npugraph_tensor", _print_npugraph_tensor, "CompositeExplicitAutograd")
    lib.impl("save_npugraph_tensor", _save_npugraph_tensor, "CompositeExplicitAutograd")
    lib.impl("save_npugraph_tensor.tensor_list", _save_npugraph_tensor_list, "CompositeExplicitAutograd")
    for overload in (torch.ops.npu.print_npugraph_tensor.default, torch.ops.npu.save_npugraph_tensor.default,
                     torch.ops.npu.save_npugraph_tensor.tensor_list):
        has_side_effect(overload)  # FX passes must not drop a call whose result nobody uses
    return lib


_LIB = _define()


def print_npugraph_tensor(input, *, tensor_name=None):
    """Prints ``[tensor_name=]<values>, shape=..., dtype=...`` when the stream
    (or each replay of the graph being captured) reaches this point."""
    return torch.ops.npu.print_npugraph_tensor(input, tensor_name=tensor_name)


def save_npugraph_tensor(input, *, save_path=None, overwrite=False):
    """torch.save of the tensor (or list of tensors) when the stream, or each
    replay of the graph being captured, reaches this point."""
    if isinstance(input, (list, tuple)):
        return torch.ops.npu.save_npugraph_tensor.tensor_list(list(input), save_path=save_path, overwrite=overwrite)
    return torch.ops.npu.save_npugraph_tensor(input, save_path=save_path, overwrite=overwrite)
