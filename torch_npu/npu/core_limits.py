"""AI-core limits: torch.npu.set_device_limit / get_device_limit and
set_stream_limit / get_stream_limit / reset_stream_limit.

On Ascend these cap how many cube (matrix) and vector cores the kernels of a
device, or of one stream, may occupy, so that concurrent streams share the
chip. The virtual NPU runs a stream's kernels on host threads and has no
cores to partition: the limits are validated against the chip's core counts
(torch.npu.get_device_properties().cube_core_num / vector_core_num), stored
and reported back, and have no effect on execution. A stream limit that was
never set follows its device's limit, as on the chip.

Thread-safety: every function may be called from any thread (one lock).
"""

import functools
import threading

import torch

from torch_npu import _C
from torch_npu.npu.device import _lazy_init

_lock = threading.Lock()
_device_limits = {}   # device index -> (cube, vector)
_stream_limits = {}   # (device index, stream id) -> (cube, vector)


def _device(device, fn):
    # An int only, as in torch_npu (a string, a float, None or a bool is refused).
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"device must be an int, but got {type(device).__name__}")
    _lazy_init()
    count = _C._device_count()
    if not 0 <= device < count:
        raise AssertionError(f"Invalid device id {device}: torch.npu.{fn} takes 0 to {count - 1}.")
    return device


def _chip_cores(index):
    props = _C._device_properties(index)
    return props["cube_core_num"], props["vector_core_num"]


def _validated(index, cube_num, vector_num, fn):
    """(cube, vector) after applying cube_num / vector_num (-1 keeps the current value)."""
    cube_max, vector_max = _chip_cores(index)
    for name, value, most in (("cube_num", cube_num, cube_max), ("vector_num", vector_num, vector_max)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"torch.npu.{fn}: {name} should be an int, got {type(value).__name__}.")
        if value != -1 and not 1 <= value <= most:
            raise RuntimeError(f"torch.npu.{fn}: {name} should be -1 (unchanged) or in [1, {most}] "
                               f"(the cores of npu:{index}), got {value}.")
    return cube_num, vector_num


def _limit_dict(limit):
    return {"cube_core_num": limit[0], "vector_core_num": limit[1]}


def _device_limit(index):
    return _device_limits.get(index) or _chip_cores(index)


class _CallOnce:
    """torch_npu's rule for set_device_limit: a process sets the device limit
    once; a second call raises. ``called`` is public, as in torch_npu (its
    tests reset it)."""

    def __init__(self, func):
        functools.update_wrapper(self, func)
        self.func = func
        self.called = False
        self.result = None

    def __call__(self, *args, **kwargs):
        if self.called:
            raise RuntimeError(f"Function '{self.func.__name__}' has already been called, "
                               "You can only set this interface once.")
        self.called = True
        self.result = self.func(*args, **kwargs)
        return self.result


@_CallOnce
def set_device_limit(device, cube_num=-1, vector_num=-1):
    """Caps the cube / vector cores of every kernel on ``device`` (-1 leaves one as it is).
    Once per process, as in torch_npu. Recorded and reported by get_device_limit; no
    effect on the virtual NPU."""
    index = _device(device, "set_device_limit")
    cube_num, vector_num = _validated(index, cube_num, vector_num, "set_device_limit")
    with _lock:
        cube, vector = _device_limit(index)
        _device_limits[index] = (cube if cube_num == -1 else cube_num, vector if vector_num == -1 else vector_num)


def get_device_limit(device):
    """{"cube_core_num": n, "vector_core_num": m}: the device's limit, the chip's core counts by default."""
    index = _device(device, "get_device_limit")
    with _lock:
        return _limit_dict(_device_limit(index))


def _stream_key(stream, fn):
    if not isinstance(stream, torch.Stream) or stream.device_type != _C._npu_device_type():
        raise TypeError(f"torch.npu.{fn}: stream should be a torch.npu.Stream, got {type(stream).__name__}.")
    _C._check_device(stream.device_index)
    return stream.device_index, stream.stream_id


def set_stream_limit(stream, cube_num=-1, vector_num=-1):
    """Caps the cube / vector cores of the kernels of ``stream`` (-1 leaves one as it is).
    Recorded and reported by get_stream_limit; no effect on the virtual NPU."""
    key = _stream_key(stream, "set_stream_limit")
    cube_num, vector_num = _validated(key[0], cube_num, vector_num, "set_stream_limit")
    with _lock:
        cube, vector = _stream_limits.get(key) or _device_limit(key[0])
        _stream_limits[key] = (cube if cube_num == -1 else cube_num, vector if vector_num == -1 else vector_num)


def get_stream_limit(stream):
    """{"cube_core_num": n, "vector_core_num": m} of ``stream``: its own limit, else its device's."""
    key = _stream_key(stream, "get_stream_limit")
    with _lock:
        return _limit_dict(_stream_limits.get(key) or _device_limit(key[0]))


def reset_stream_limit(stream):
    """Drops the stream's own limit: it follows its device's limit again."""
    key = _stream_key(stream, "reset_stream_limit")
    with _lock:
        _stream_limits.pop(key, None)
