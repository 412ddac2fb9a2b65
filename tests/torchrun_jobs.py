"""torchrun jobs for the hccl tests (tests/test_distributed*.py): each runs a
script of tests/distributed/ on npu, bounded by a timeout so that a hang
fails the test."""

import pathlib
import socket
import subprocess
import sys
import time

from conftest import clean_env

SCRIPTS = pathlib.Path(__file__).parent / "distributed"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(script, nproc, timeout=240, **env):
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
           f"--master_port={free_port()}", str(SCRIPTS / script)]
    proc = subprocess.run(cmd, env=clean_env(OMP_NUM_THREADS=1, **env), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    for rank in range(nproc):
        assert f"RANK {rank} OK" in proc.stdout, proc.stdout[-3000:]
    return proc


def torchrun_failing(script, nproc, timeout=120, **env):
    """A job that must fail: returns its output (stdout + stderr) and how long it took."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
           f"--master_port={free_port()}", str(SCRIPTS / script)]
    start = time.monotonic()
    proc = subprocess.run(cmd, env=clean_env(OMP_NUM_THREADS=1, **env), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode != 0, proc.stdout[-3000:]
    return proc.stdout + proc.stderr, time.monotonic() - start
