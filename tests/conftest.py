"""Shared fixtures for the vNPU test suite.

Every test runs against the real emulator: ``import torch_npu`` registers the
virtual ``npu`` device and kernels run asynchronously on worker threads. Most
tests are differential: the same computation on npu and on cpu must agree.
"""

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest
import torch

import torch_npu  # registers the npu device
import torch_npu._environment

# Environment variables that change how the emulator starts. Tests that run
# subprocesses start from a clean slate so that a developer's shell (or the
# CI job) cannot change their outcome.
_VNPU_ENV = tuple(torch_npu._environment.runtime_variable_names())


# Every profile writes a *_ascend_pt folder, under $ASCEND_WORK_PATH/profiling_data or else
# the current directory (torch_npu/profiler/_profiler_path_creator.py): the suite's go to a
# temporary folder, never into the checkout (subprocesses inherit it).
os.environ.setdefault("ASCEND_WORK_PATH", tempfile.mkdtemp(prefix="vnpu_tests_work_"))


# The files that take longest (minutes: the OpInfo coverage sweep, torchrun
# jobs, extension builds) go first, so that scripts/test.sh's two workers
# (pytest-xdist, a file at a time) end together instead of one running the
# last long file alone. Order within a file is kept.
_LONG_FILES = ("test_op_coverage.py", "test_distributed_training.py", "test_distributed_faults.py",
               "test_distributed.py", "test_cpp_extension.py", "test_aclnn.py", "test_ascendc_npu.py",
               "test_memory_allocator.py")


def pytest_collection_modifyitems(config, items):
    def rank(item):
        name = os.path.basename(str(item.fspath))
        return _LONG_FILES.index(name) if name in _LONG_FILES else len(_LONG_FILES)
    items.sort(key=rank)  # stable


@pytest.fixture(autouse=True, scope="session")
def _opinfo_samples_without_source_reads():
    """OpInfo.sample_inputs finds the running test without reading source
    (torch_npu/testing/_sample_input_speed.py): the OpInfo sweeps spent three
    quarters of their time in that lookup."""
    from torch_npu.testing._sample_input_speed import frames_only_test_fn_lookup
    with frames_only_test_fn_lookup():
        yield


@pytest.fixture(autouse=True)
def _npu_clean_state():
    """Each test starts on device 0 and leaves no queued work behind.

    A test that provokes an asynchronous kernel error must consume it itself;
    draining here makes a leaked error fail the test that leaked it, not the
    next one.
    """
    torch.npu.set_device(0)
    yield
    torch.npu.synchronize()
    # A test that leaves a side stream current changes what the next test's
    # torch.npu.Stream() and default-stream work mean (the pool hands out
    # streams round-robin, so a later "new" stream can be the current one).
    leaked = [i for i in range(torch.npu.device_count())
              if torch.npu.current_stream(i) != torch.npu.default_stream(i)]
    for i in leaked:
        torch.npu.set_stream(torch.npu.default_stream(i))
    torch.npu.set_device(0)
    assert not leaked, f"the test left a non-default current stream on npu {leaked}; restore it"


def clean_env(**overrides):
    """os.environ without the vNPU switches, plus ``overrides`` (str values)."""
    env = {k: v for k, v in os.environ.items() if k not in _VNPU_ENV}
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def run_python(code, timeout=120, **env_overrides):
    """Runs ``code`` in a fresh interpreter; returns the CompletedProcess.

    Used for everything decided at import time (environment variables) and for
    behaviour that must not leak into this process (fallback switches, crashes).
    """
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=clean_env(**env_overrides), capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def npu():
    """The default npu device, for tests that want it as a parameter."""
    return torch.device("npu:0")
