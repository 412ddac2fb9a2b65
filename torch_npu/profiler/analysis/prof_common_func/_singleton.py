"""``@Singleton``: one instance of a class per process, as torch_npu's analysis keeps its databases."""

import functools
import threading

__all__ = []


def Singleton(cls):  # noqa: N802 - torch_npu's name for it
    """Makes ``cls()`` return the same instance every time (created on the first call)."""
    instances = {}
    lock = threading.Lock()

    @functools.wraps(cls, updated=())
    def get_instance(*args, **kwargs):
        if cls not in instances:
            with lock:
                if cls not in instances:
                    instances[cls] = cls(*args, **kwargs)
        return instances[cls]

    get_instance.__wrapped_class__ = cls
    return get_instance
