"""Fixtures for the contrib.module tests."""

import pytest

from torch_npu.contrib import module as cm


@pytest.fixture
def fresh_task_queues():
    """NpuDropPath / NpuCachedDropout keep class-level queues: isolate each test."""
    saved = (dict(cm.NpuDropPath.task_dict), dict(cm.NpuCachedDropout.task_dict))
    cm.NpuDropPath.task_dict.clear()
    cm.NpuCachedDropout.task_dict.clear()
    yield
    cm.NpuDropPath.task_dict.clear()
    cm.NpuDropPath.task_dict.update(saved[0])
    cm.NpuCachedDropout.task_dict.clear()
    cm.NpuCachedDropout.task_dict.update(saved[1])
