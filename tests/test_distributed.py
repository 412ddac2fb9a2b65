"""The hccl backend under torchrun (tests/distributed/*.py), 2 and 3 ranks on
npu, each job bounded by a timeout so that a hang fails the test. Plus the
single-process API: Options, registration, and the errors."""

import datetime
import json
import os
import pickle
import re
import socket
import subprocess
import sys
import pathlib
import time

import pytest
import torch
import torch.distributed as dist

import torch_npu
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


@pytest.mark.parametrize("nproc", [2, 3])
def test_every_collective(nproc):
    torchrun("collectives.py", nproc)  # one host: shared memory


def test_every_collective_without_shared_device_memory():
    # Shared memory, but device memory private: large collectives copy through the slots.
    torchrun("collectives.py", 2, VNPU_SHARED_DEVICE_MEMORY="0")


def test_every_collective_across_hosts():
    # Every rank a "host" of its own: the socket (gloo) path.
    torchrun("collectives.py", 2, VNPU_HCCL_HOST="host{rank}")


def test_every_collective_on_two_hosts_of_two_ranks():
    # Hierarchical all_reduce: shared memory inside each host, sockets between the hosts' leaders.
    torchrun("collectives.py", 4, timeout=300, VNPU_HCCL_HOST="host{rank//2}")


def test_host_identity_patterns():
    from torch_npu.distributed import _host_identity
    assert _host_identity("node", 3) == "node"
    assert _host_identity("host{rank}", 3) == "host3"
    assert [_host_identity("h{rank//2}", r) for r in range(4)] == ["h0", "h0", "h1", "h1"]
    with pytest.raises(ValueError, match=r"only \{rank\} and \{rank//K\}"):
        _host_identity("h{local_rank}", 0)
    with pytest.raises(ValueError):
        _host_identity("h{rank//0}", 0)


def test_ddp_trains_like_one_process():
    torchrun("ddp_train.py", 2)


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


def torchrun_failing(script, nproc, timeout=120, **env):
    """A job that must fail: returns its output (stdout + stderr) and how long it took."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
           f"--master_port={free_port()}", str(SCRIPTS / script)]
    start = time.monotonic()
    proc = subprocess.run(cmd, env=clean_env(OMP_NUM_THREADS=1, **env), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode != 0, proc.stdout[-3000:]
    return proc.stdout + proc.stderr, time.monotonic() - start


def test_a_stalled_peer_ends_in_the_watchdog_error_not_a_hang():
    torchrun("faults.py", 2, timeout=120, FAULT="stalled_peer", TORCH_HCCL_ASYNC_ERROR_HANDLING=0)


def test_by_default_a_failed_collective_takes_the_process_down(tmp_path):
    # TORCH_HCCL_ASYNC_ERROR_HANDLING=1, torch_npu's default; with the flight
    # recorder on, the timed-out rank dumps its trace before it goes down.
    prefix = str(tmp_path / "hccl_trace_rank_")
    out, took = torchrun_failing("faults.py", 2, FAULT="stalled_peer", TORCH_HCCL_DUMP_ON_TIMEOUT=1,
                                 TORCH_HCCL_TRACE_BUFFER_SIZE=8, TORCH_HCCL_DEBUG_INFO_TEMP_FILE=prefix)
    assert "Watchdog caught collective operation timeout" in out and "OpType=ALLREDUCE" in out, out[-3000:]
    assert "[Rank 0] To avoid data inconsistency, we are taking the entire process down." in out, out[-3000:]
    assert "RANK 0 OK" not in out
    assert took < 60, took
    with open(prefix + "0", "rb") as f:
        entries = pickle.load(f)["entries"]
    # The first all_reduce completed; the one rank 1 never joined had started.
    assert [(e["profiling_name"], e["state"]) for e in entries][-2:] == [
        ("hccl:all_reduce", "completed"), ("hccl:all_reduce", "started")], entries
    assert "faults.py" in {os.path.basename(frame["filename"]) for frame in entries[-1]["frames"]}
    assert "MainThread" in pathlib.Path(prefix + "0_py_traceback").read_text()


FLIGHT_RECORDER = '''
import os, pickle, sys, time
import torch, torch.distributed as dist, torch_npu
store = sys.argv[1]
torch_npu._C._distributed_c10d._set_watchdog_limits_for_testing(400, 800)  # dispatch, dump (ms)
dist.init_process_group("hccl", init_method="file://" + store, rank=0, world_size=1)
t = torch.ones(4, device="npu")
for _ in range(5):
    dist.all_reduce(t)
print("BEFORE", pickle.loads(torch_npu._C._distributed_c10d._dump_hccl_trace(onlyActive=True))["entries"], flush=True)
torch.npu._sleep(2_000_000)  # the next collective waits behind 2 s of work
dist.all_reduce(t)
torch.npu.synchronize()
time.sleep(0.6)  # the watchdog reports the dispatch
trace = pickle.loads(torch_npu._C._distributed_c10d._dump_hccl_trace())
print("TRACE", [(e["collective_seq_id"], e["state"], e["input_sizes"], e["input_dtypes"]) for e in trace["entries"]])
print("VALUE", t.cpu().tolist())
dist.destroy_process_group()
'''


def test_the_flight_recorder_keeps_the_last_collectives_and_dumps_a_stalled_one(tmp_path):
    prefix = str(tmp_path / "trace_")
    script = tmp_path / "fr.py"
    script.write_text(FLIGHT_RECORDER)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "store")], capture_output=True, text=True,
                          timeout=120, env=clean_env(TORCH_HCCL_TRACE_BUFFER_SIZE=4, TORCH_HCCL_DUMP_ON_TIMEOUT=1,
                                                     TORCH_HCCL_DEBUG_INFO_TEMP_FILE=prefix))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "BEFORE []" in proc.stdout  # every recorded collective had completed
    # A ring of 4: collectives 3-6, the last one dispatched late but done.
    assert "TRACE " + str([(seq, "completed", [[4]], ["Float"]) for seq in range(3, 7)]) in proc.stdout, proc.stdout
    assert "VALUE [1.0, 1.0, 1.0, 1.0]" in proc.stdout
    err = proc.stderr
    assert err.count("Process group work ALLREDUCE, seq_num 6 dispatch timeout.") == 1, err
    assert err.count("Process group work ALLREDUCE, seq_num 6 dispatch success.") == 1, err
    # Unfinished past the dump limit: the trace and the stacks, while it waited.
    with open(prefix + "0", "rb") as f:
        dumped = pickle.load(f)
    assert dumped["version"] == "2.10"
    assert [(e["collective_seq_id"], e["state"]) for e in dumped["entries"]][-1] == (6, "scheduled")
    assert pathlib.Path(prefix + "0_py_traceback").read_text().startswith("pid: ")


def test_async_error_handling_2_aborts_the_group():
    torchrun("faults.py", 2, timeout=120, FAULT="stalled_peer", TORCH_HCCL_ASYNC_ERROR_HANDLING=2)


def test_heartbeat_monitor_ends_a_stuck_collective():
    # The group would wait 60 s; the monitor allows a collective 2 s.
    out, took = torchrun_failing("faults.py", 2, FAULT="stalled_peer", GROUP_TIMEOUT_S=60,
                                 TORCH_HCCL_ASYNC_ERROR_HANDLING=0, TORCH_HCCL_ENABLE_MONITORING=1,
                                 TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC=2)
    assert "[Rank 0] Heartbeat monitor timed out!" in out, out[-3000:]
    assert "TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC" in out
    assert took < 45, took


def test_a_sticky_kernel_error_does_not_leave_the_peers_waiting():
    torchrun("faults.py", 2, timeout=120, FAULT="sticky_error", TORCH_HCCL_ASYNC_ERROR_HANDLING=0)


def test_desync_debug_names_mismatched_collectives():
    # Through the old name of the handling variable, which still works and warns.
    proc = torchrun("faults.py", 2, timeout=120, FAULT="mismatch", GROUP_TIMEOUT_S=60, TORCH_HCCL_DESYNC_DEBUG=1,
                    HCCL_ASYNC_ERROR_HANDLING=0)
    assert "HCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_HCCL_ASYNC_ERROR_HANDLING instead" in proc.stderr


def test_desync_debug_over_sockets():
    # Every rank a host of its own: the signatures are all-gathered over gloo first.
    torchrun("faults.py", 2, timeout=120, FAULT="mismatch", GROUP_TIMEOUT_S=60, TORCH_HCCL_DESYNC_DEBUG=1,
             TORCH_HCCL_ASYNC_ERROR_HANDLING=0, VNPU_HCCL_HOST="host{rank}")


def test_hccl_exec_timeout_and_blocking_wait():
    # HCCL_EXEC_TIMEOUT (2 s) beats the group's 60 s; with blocking wait the
    # error raises in all_reduce itself (blocking wait overrides the handling mode).
    torchrun("faults.py", 2, timeout=120, FAULT="stalled_peer", GROUP_TIMEOUT_S=60, HCCL_EXEC_TIMEOUT=2,
             TORCH_HCCL_BLOCKING_WAIT=1)


def test_registered_as_npus_backend():
    assert "hccl" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map["npu"] == "hccl"
    assert dist.is_hccl_available()
    assert torch_npu._C._distributed_c10d.ProcessGroupHCCL is torch_npu.distributed.ProcessGroupHCCL


def test_options():
    opts = torch_npu._C._distributed_c10d.ProcessGroupHCCL.Options()
    assert opts.backend == "hccl" and opts.is_high_priority_stream is False
    opts.hccl_config = {"hccl_buffer_size": 200, "group_name": "tp"}
    assert opts.hccl_config == {"hccl_buffer_size": 200, "group_name": "tp"}
    with pytest.raises(TypeError, match="Value type of hccl_buffer_size should be int."):
        opts.hccl_config = {"hccl_buffer_size": "200"}
    with pytest.raises(ValueError, match="group_name should be no more than 32"):
        opts.hccl_config = {"group_name": "x" * 33}
    opts.op_timeout = datetime.timedelta(seconds=5)
    assert opts._timeout == datetime.timedelta(seconds=5)
    assert opts.hccl_config == {"hccl_buffer_size": 200, "group_name": "tp"}  # a rejected value changed nothing


def test_single_process_group_and_errors():
    # One rank in this process, over a HashStore: the collectives and their refusals.
    store = dist.HashStore()
    pg = torch_npu._C._distributed_c10d.ProcessGroupHCCL(store, 0, 1, datetime.timedelta(seconds=30))
    assert pg.name() == "hccl" and pg.size() == 1
    t = torch.arange(4.0, device="npu")
    pg.allreduce([t]).wait()
    assert torch.equal(t.cpu(), torch.arange(4.0))
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.BXOR
    with pytest.raises(RuntimeError, match="Cannot use ReduceOp.BXOR with HCCL"):
        pg.allreduce([torch.ones(1, dtype=torch.int32, device="npu")], opts)
    with pytest.raises(RuntimeError, match="Unsupported data type at::kByte"):
        pg.allreduce([torch.ones(1, dtype=torch.uint8, device="npu")])
    with pytest.raises(RuntimeError, match="Tensors must be NPU"):
        pg.allreduce([torch.ones(1)])
    with pytest.raises(RuntimeError, match="does not support recv"):
        pg.recv_anysource([torch.ones(1, device="npu")], 0)
    assert pg.get_hccl_comm_name(0).startswith("hccl_comm_")


def _run_rank(code, rank, world, port, timeout=60):
    return subprocess.Popen([sys.executable, "-c", code, str(rank), str(world), str(port)],
                            env=clean_env(OMP_NUM_THREADS=1), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


BAD_INIT = """
import datetime, sys, torch, torch_npu, torch.distributed as dist
rank, world, port = map(int, sys.argv[1:])
try:
    dist.init_process_group("hccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=4))
    t = torch.ones(2, device="npu")
    dist.all_reduce(t)
    t.cpu()
    print("NO ERROR")
except Exception as e:
    print("ERROR", type(e).__name__, str(e).splitlines()[0][:200])
"""


def test_unreachable_rendezvous_raises_within_the_timeout():
    port = free_port()  # nobody listens there, and rank 1 never comes
    proc = _run_rank(BAD_INIT, 1, 2, port)
    out, err = proc.communicate(timeout=90)
    assert "ERROR" in out, out + err[-2000:]


def test_world_sizes_that_disagree_raise_not_hang():
    port = free_port()
    procs = [_run_rank(BAD_INIT, 0, 2, port), _run_rank(BAD_INIT, 1, 3, port)]
    outs = [p.communicate(timeout=120) for p in procs]
    for out, err in outs:
        assert "ERROR" in out, out + err[-2000:]


def test_a_device_index_beyond_the_device_count_is_named():
    code = """
import torch, torch_npu, torch.distributed as dist
try:
    dist.init_process_group("hccl", init_method="tcp://127.0.0.1:%d", rank=0, world_size=1,
                            device_id=torch.device("npu", 99))
    print("NO ERROR")
except ValueError as e:
    print("ERROR", e)
""" % free_port()
    proc = subprocess.run([sys.executable, "-c", code], env=clean_env(OMP_NUM_THREADS=1), capture_output=True,
                          text=True, timeout=60)
    assert "ERROR device_id npu:99 is out of range" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert "less than the number of accelerators available: 8" in proc.stdout
