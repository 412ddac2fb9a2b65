"""Training under torchrun on the hccl backend, 2 ranks on npu, against one
process or the same job on cpu/gloo: DDP, FSDP (1 and 2), DeepSpeed ZeRO
1-3, accelerate."""

import json
import re
import subprocess
import sys

import pytest

from conftest import clean_env
from torchrun_jobs import SCRIPTS, free_port, torchrun


def test_ddp_trains_like_one_process():
    torchrun("ddp_train.py", 2)


def test_a_model_split_across_two_devices_per_rank_trains_like_one_process():
    # One group's collectives on two devices' streams pair in issue order; ZeRO's consolidated state is right.
    torchrun("model_parallel_train.py", 2)


def test_sync_batch_norm_trains_like_batch_norm_on_the_whole_batch():
    torchrun("syncbn_train.py", 2)


def test_fsdp2_trains_like_one_process_and_checkpoints(tmp_path):
    torchrun("fsdp_train.py", 2, CKPT_DIR=tmp_path / "ckpt")


def test_fsdp1_trains_like_one_process():
    torchrun("fsdp_train.py", 2, FSDP_VERSION=1)


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_deepspeed_zero_trains_like_deepspeed_on_cpu(stage):
    pytest.importorskip("deepspeed", reason="deepspeed missing: run scripts/setup_clients.sh")

    def losses(proc):
        return json.loads(re.search(r"RANK 0 OK losses=(\[[^\]]*\])", proc.stdout).group(1))

    npu = losses(torchrun("deepspeed_train.py", 2, ZERO_STAGE=stage))
    cpu = losses(torchrun("deepspeed_train.py", 2, ZERO_STAGE=stage, DS_ACCELERATOR="cpu", DS_BACKEND="gloo",
                          TORCH_DEVICE_BACKEND_AUTOLOAD=0))
    assert npu[-1] < npu[0]
    assert npu == pytest.approx(cpu, rel=1e-5, abs=1e-6)


def test_accelerate_launch_two_processes_like_cpu():
    pytest.importorskip("accelerate", reason="accelerate missing: run scripts/setup_clients.sh")

    def run(**env):
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--main_process_port",
               str(free_port()), str(SCRIPTS / "accelerate_train.py")]
        proc = subprocess.run(cmd, env=clean_env(OMP_NUM_THREADS=1, **env), capture_output=True, text=True,
                              timeout=240)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
        return json.loads(re.search(r"RANK 0 OK losses=(\[[^\]]*\])", proc.stdout).group(1))

    npu = run()
    cpu = run(ACCELERATE_USE_CPU=1)
    assert npu == pytest.approx(cpu, rel=1e-5, abs=1e-6)
