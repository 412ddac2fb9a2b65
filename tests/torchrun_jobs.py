"""torchrun jobs for the hccl tests (tests/test_distributed*.py): each runs a
script of tests/distributed/ on npu, bounded by a timeout so that a hang
fails the test."""

import pathlib
import random
import socket
import subprocess
import sys
import time

from conftest import clean_env

SCRIPTS = pathlib.Path(__file__).parent / "distributed"


def free_port():
    """A port nobody listens on, below the kernel's ephemeral range (32768 and
    up on Linux): a port the kernel handed out with bind(0) is free only until
    some outgoing connection (another test's store client) is given it, which
    once made a torchrun job fail with EADDRINUSE."""
    for _ in range(100):
        port = random.randrange(20000, 32768)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32767")


def _port_taken(proc):
    return "EADDRINUSE" in proc.stderr and "RANK 0 OK" not in proc.stdout


def torchrun(script, nproc, timeout=240, **env):
    for _ in range(3):  # another test may have taken the port between free_port() and the store's bind
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
               f"--master_port={free_port()}", str(SCRIPTS / script)]
        proc = subprocess.run(cmd, env=clean_env(OMP_NUM_THREADS=1, **env), capture_output=True, text=True,
                              timeout=timeout)
        if not _port_taken(proc):
            break
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
