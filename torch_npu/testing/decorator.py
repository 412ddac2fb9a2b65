"""torch_npu's test decorators: @Dtypes/@Formats with @instantiate_tests make one
test per dtype and format; @graph_mode is accepted (vNPU runs eagerly)."""

import functools
import inspect
import itertools

import torch


class Dtypes:
    def __init__(self, *dtypes):
        if not dtypes or not all(isinstance(d, torch.dtype) for d in dtypes):
            raise ValueError(f"Dtypes needs torch dtypes, got {dtypes}")
        self.args = dtypes

    def __call__(self, fn):
        fn.dtypes = self.args
        return fn


class Formats:
    def __init__(self, *formats):
        if not formats:
            raise ValueError("Formats needs at least one format")
        self.args = formats

    def __call__(self, fn):
        fn.formats = self.args
        return fn


def _bind(fn, name, kwargs):
    @functools.wraps(fn)
    def test(self):
        return fn(self, **kwargs)
    test.__name__ = name
    return test


def instantiate_tests(cls):
    """Replaces each @Dtypes/@Formats test by one test per combination
    (test_x_float32_2, ...), passing `device="npu"` if the test takes it."""
    for name, fn in list(cls.__dict__.items()):
        axes = {key: getattr(fn, attr) for key, attr in (("dtype", "dtypes"), ("format", "formats"))
                if hasattr(fn, attr)}
        if not axes:
            continue
        params = inspect.getfullargspec(fn).args
        for values in itertools.product(*axes.values()):
            kwargs = {"device": "npu"} if "device" in params else {}
            test_name = name
            for key, value in zip(axes, values):
                test_name += "_" + (str(value).split(".")[1] if key == "dtype" else str(value))
                kwargs[next(p for p in params if key in p)] = value
            setattr(cls, test_name, _bind(fn, test_name, kwargs))
        delattr(cls, name)
    return cls


def graph_mode(fn):
    return fn
