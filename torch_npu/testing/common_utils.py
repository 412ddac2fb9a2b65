"""Helpers of torch_npu's test suites: cpu/npu tensor pairs, RNG freezing,
device selection and device-dependent skips."""

import contextlib
import functools
import itertools
import os
import sys
import tempfile
import unittest

import numpy as np
import torch

import torch_npu

IS_WINDOWS = sys.platform == "win32"
PERF_TEST_ENABLE = os.getenv("PERF_TEST_ENABLE", "").upper() in ("ON", "1", "YES", "TRUE", "Y")


@contextlib.contextmanager
def TemporaryFileName():
    with tempfile.NamedTemporaryFile() as f:
        yield f.name


@contextlib.contextmanager
def freeze_rng_state():
    """Restores the cpu (and npu) RNG state on exit."""
    cpu_state = torch.get_rng_state()
    npu_state = torch.npu.get_rng_state()
    try:
        yield
    finally:
        torch.set_rng_state(cpu_state)
        torch.npu.set_rng_state(npu_state)


def iter_indices(tensor):
    if tensor.dim() == 0:
        return range(0)
    if tensor.dim() == 1:
        return range(tensor.size(0))
    return itertools.product(*(range(s) for s in tensor.size()))


def is_iterable(obj):
    try:
        iter(obj)
        return True
    except TypeError:
        return False


def get_npu_device():
    """"npu:N" with N from SET_NPU_DEVICE (default 0)."""
    index = os.environ.get("SET_NPU_DEVICE")
    return "npu:0" if index is None else f"npu:{index}"


def set_npu_device():
    device = get_npu_device()
    torch.npu.set_device(device)
    return device


def create_common_tensor(item, minValue, maxValue, device=None):
    """(cpu, npu) copies of one uniform random array; item = [numpy dtype, npu_format, shape]."""
    dtype, npu_format, shape = item[0], item[1], item[2]
    data = np.random.uniform(minValue, maxValue, shape).astype(dtype)
    cpu_input = torch.from_numpy(data)
    npu_input = torch.from_numpy(data).to(device or get_npu_device())
    if npu_format != -1:
        npu_input = torch_npu.npu_format_cast(npu_input, npu_format)
    return cpu_input, npu_input


def create_dtype_tensor(shape, dtype, npu_format=-1, min_value=-5, max_value=5, no_zero=False, device=None):
    if dtype == torch.bool:
        data = np.random.randint(0, 2, size=shape).astype(bool)
    elif dtype == torch.half:
        data = np.random.uniform(min_value, max_value, shape).astype(np.float16)
    elif dtype == torch.float:
        data = np.random.uniform(min_value, max_value, shape).astype(np.float32)
    else:
        data = np.random.randint(min_value, max_value + 1, size=shape).astype(np.int32)
    if no_zero:
        data = np.where(data != 0, data, np.ones_like(data))
    cpu_input = torch.from_numpy(data)
    npu_input = torch.from_numpy(data).to(device or get_npu_device())
    if npu_format != -1 and dtype in (torch.float, torch.half):
        npu_input = torch_npu.npu_format_cast(npu_input, npu_format)
    return cpu_input, npu_input


def check_operators_in_prof(expected_operators, prof, unexpected_operators=None):
    """True if every expected operator, and none of the unexpected, appears in the profile."""
    expected = list(expected_operators)
    for item in prof.key_averages():
        if item.key in (unexpected_operators or []):
            return False
        if item.key in expected:
            expected.remove(item.key)
    return not expected


def _device_name():
    return torch.npu.get_device_name(0) if torch.npu.is_available() else ""


def SupportedDevices(devices):
    """Skips the test unless the chip's name starts with one of `devices`
    (e.g. ['Ascend910B'] runs on Ascend910B1-B4; the chip is VNPU_CHIP)."""
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            name = _device_name()
            if not any(name.startswith(d) for d in devices):
                raise unittest.SkipTest(f"only runs on {devices}, this device is {name}")
            return fn(*args, **kwargs)
        return wrapper
    return decorator


def skipIfUnsupportMultiNPU(npu_number_needed):
    """Skips the test on fewer than `npu_number_needed` devices."""
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if torch.npu.device_count() < npu_number_needed:
                raise unittest.SkipTest(f"needs {npu_number_needed} NPUs, found {torch.npu.device_count()}")
            return fn(*args, **kwargs)
        return wrapper
    return decorator


def test_2args_broadcast(fn):
    """[[cpu result, npu result], ...] of fn on broadcasting argument pairs."""
    results = []
    for x_shape, y_shape in (((2, 3, 4, 5), (1, 1, 1)), ((2, 3, 4, 5), (4, 5))):
        x = np.random.rand(*x_shape).astype(np.float32)
        y = np.random.rand(*y_shape).astype(np.float32)
        cpu = fn(torch.from_numpy(x), torch.from_numpy(y)).numpy()
        npu = fn(torch.from_numpy(x).npu(), torch.from_numpy(y).npu()).cpu().numpy()
        results.append([cpu, npu])
    return results


test_2args_broadcast.__test__ = False  # a helper, not a pytest test
