"""torch_npu.distributed's submodules (nn.functional, fsdp, pipelining, run,
rendezvous, rpc, tensor) on 2 ranks over hccl."""

import subprocess
import sys

from conftest import clean_env
from torchrun_jobs import SCRIPTS, free_port, torchrun


def test_autograd_collectives_fsdp_and_pipeline_on_hccl():
    torchrun("submodules.py", 2, timeout=180)


def test_torch_npu_run_launches_with_parallel_rendezvous():
    cmd = [sys.executable, "-m", "torch_npu.distributed.run", "--nproc_per_node=2", f"--master_port={free_port()}",
           "--enable_tiered_parallel_tcpstore=true", str(SCRIPTS / "submodules.py")]
    proc = subprocess.run(cmd, env=clean_env(OMP_NUM_THREADS=1, MODE="run"), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    for rank in range(2):
        assert f"RANK {rank} OK" in proc.stdout, proc.stdout[-3000:]


def test_unsupported_entry_points_raise_with_a_reason():
    code = (
        "import torch_npu\n"
        "from torch_npu.distributed.run import parse_args\n"
        "a = parse_args(['--nproc_per_node=2', '--enable_tiered_parallel_tcpstore=true', 's.py', '--x'])\n"
        "assert (a.enable_tiered_parallel_tcpstore, a.training_script, a.training_script_args) == "
        "('true', 's.py', ['--x'])\n"
        "assert parse_args(['s.py']).enable_tiered_parallel_tcpstore == 'false'\n"
        "from torch_npu.distributed.rpc import NPUTensorPipeRpcBackendOptions\n"
        "from torch_npu.distributed.tensor import context_parallel\n"
        "for f in (NPUTensorPipeRpcBackendOptions, context_parallel):\n"
        "    try:\n"
        "        f()\n"
        "    except RuntimeError as e:\n"
        "        assert 'is not supported on vNPU: ' in str(e), e\n"
        "    else:\n"
        "        raise AssertionError(f)\n"
        "print('OK')\n")
    proc = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-4000:]
