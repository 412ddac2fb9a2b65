"""Failures of hccl jobs under torchrun: a stalled peer, an exited one, tensors on two devices, the error handling
modes, the heartbeat monitor, sticky kernel errors, desync debug,
HCCL_EXEC_TIMEOUT, and the flight recorder."""

import os
import pickle
import subprocess
import sys
import pathlib

from conftest import clean_env
from torchrun_jobs import torchrun, torchrun_failing


def test_a_stalled_peer_ends_in_the_watchdog_error_not_a_hang():
    torchrun("faults.py", 2, timeout=120, FAULT="stalled_peer", TORCH_HCCL_ASYNC_ERROR_HANDLING=0)


def test_a_peer_whose_process_exited_fails_the_collective_at_once():
    # the group's timeout is 300 s: the error must come from noticing the exited process, not from the deadline
    torchrun("faults.py", 2, timeout=120, FAULT="exited_peer", TORCH_HCCL_ASYNC_ERROR_HANDLING=0,
             GROUP_TIMEOUT_S=300)


def test_tensors_on_two_devices_are_refused_in_torch_npus_words():
    torchrun("faults.py", 2, timeout=120, FAULT="wrong_devices")


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
    # The first all_reduce completed; the one rank 1 never joined is still
    # scheduled (torch_npu knows a start only with TORCH_HCCL_DESYNC_DEBUG=1),
    # and, as in torch_npu, collectives carry no profiling name.
    assert [(e["collective_seq_id"], e["profiling_name"], e["state"]) for e in entries][-2:] == [
        (1, "", "completed"), (2, "", "scheduled")], entries
    assert "faults.py" in {os.path.basename(frame["filename"]) for frame in entries[-1]["frames"]}
    assert "MainThread" in pathlib.Path(prefix + "0_py_traceback").read_text()


def test_a_failed_collective_signals_every_rank_to_dump(tmp_path):
    # With monitoring on, rank 0's failure sets the store's dump signal; rank 1,
    # asleep outside any collective, finds it and dumps its trace too, and both
    # go on (handling mode 0: rank 0's error raises at its sync).
    prefix = str(tmp_path / "trace_")
    proc = torchrun("faults.py", 2, timeout=120, FAULT="stalled_peer", TORCH_HCCL_ASYNC_ERROR_HANDLING=0,
                    TORCH_HCCL_DUMP_ON_TIMEOUT=1, TORCH_HCCL_TRACE_BUFFER_SIZE=8,
                    TORCH_HCCL_DEBUG_INFO_TEMP_FILE=prefix, TORCH_HCCL_ENABLE_MONITORING=1,
                    TORCH_HCCL_COORD_CHECK_MILSEC=200)
    out = proc.stdout + proc.stderr
    assert "[Rank 1] Received a global dump signal from rank 0, and will start to dump the debug info." in out, \
        out[-3000:]
    for rank, last in ((0, (2, "scheduled")), (1, (1, "completed"))):
        with open(prefix + str(rank), "rb") as f:
            entries = pickle.load(f)["entries"]
        assert [(e["collective_seq_id"], e["state"]) for e in entries][-1] == last, (rank, entries)


FLIGHT_RECORDER = '''
import json, os, pickle, sys, time
import torch, torch.distributed as dist, torch_npu
store = sys.argv[1]
torch_npu._C._distributed_c10d._set_watchdog_limits_for_testing(400, 800)  # dispatch, dump (ms)
dist.init_process_group("hccl", init_method="file://" + store, rank=0, world_size=1)
t = torch.ones(4, device="npu")
for _ in range(5):
    dist.all_reduce(t)
torch.npu.synchronize()
# the watchdog marks finished work completed when it next polls: wait for it (a loaded machine delays it)
for _ in range(100):
    active = pickle.loads(torch_npu._C._distributed_c10d._dump_hccl_trace(onlyActive=True))["entries"]
    if not active:
        break
    time.sleep(0.05)
print("BEFORE", active, flush=True)
torch.npu._sleep(2_000_000)  # the next collective waits behind 2 s of work
dist.all_reduce(t)
torch.npu.synchronize()
time.sleep(0.6)  # the watchdog reports the dispatch
trace = pickle.loads(torch_npu._C._distributed_c10d._dump_hccl_trace())
print("TRACE", [(e["collective_seq_id"], e["state"], e["input_sizes"], e["input_dtypes"]) for e in trace["entries"]])
print("VALUE", t.cpu().tolist())
# The JSON dump is the pickled one without stacks (tuples become lists), in
# torch_npu's JSON spelling: pg_status's numbers as strings, unknown times 0.
as_json = json.loads(torch_npu._C._distributed_c10d._dump_hccl_trace_json())
without_stacks = pickle.loads(torch_npu._C._distributed_c10d._dump_hccl_trace(includeStackTraces=False))
for status in without_stacks["pg_status"].values():
    status.update({k: str(v) for k, v in status.items()})
for e in without_stacks["entries"]:
    e.update({k: e[k] or 0 for k in ("time_discovered_started_ns", "time_discovered_completed_ns")})
print("JSON SAME", as_json == json.loads(json.dumps(without_stacks)), len(as_json["entries"]))
print("PG", without_stacks["version"], without_stacks["pg_config"], without_stacks["pg_status"])
print("NAMES", {(tuple(e["process_group"]), e["profiling_name"], e["timeout_ms"]) for e in trace["entries"]})
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
    assert "JSON SAME True 4" in proc.stdout, proc.stdout
    # torch_npu's format "2.4": the group by its name and ranks, its last collectives; the default
    # group's watchdog timeout is HCCL's execution timeout (1836 s) plus 30 minutes.
    assert ("PG 2.4 {'group_name_0': {'name': 'group_name_0', 'desc': '', 'ranks': '[0]'}} "
            "{'0': {'last_enqueued_collective': '6', 'last_started_collective': '-1', "
            "'last_completed_collective': '6'}}") in proc.stdout, proc.stdout
    assert "NAMES {(('group_name_0', ''), '', 3636000)}" in proc.stdout, proc.stdout
    err = proc.stderr
    assert err.count("Process group work ALLREDUCE, seq_num 6 dispatch timeout.") == 1, err
    assert err.count("Process group work ALLREDUCE, seq_num 6 dispatch success.") == 1, err
    # Unfinished past the dump limit: the trace and the stacks, while it waited.
    with open(prefix + "0", "rb") as f:
        dumped = pickle.load(f)
    assert dumped["version"] == "2.4"
    assert [(e["collective_seq_id"], e["state"]) for e in dumped["entries"]][-1] == (6, "scheduled")
    assert pathlib.Path(prefix + "0_py_traceback").read_text().startswith("pid: ")


DUMP_PIPE = '''
import os, pickle, sys, time
import torch, torch.distributed as dist, torch_npu
prefix = sys.argv[2]
dist.init_process_group("hccl", init_method="file://" + sys.argv[1], rank=0, world_size=1)
pipe = prefix + "0.pipe"
assert os.path.exists(pipe), "the world group made no dump pipe"
t = torch.ones(4, device="npu")
dist.all_reduce(t)
torch.npu.synchronize()
with open(pipe, "w") as f:  # as a user would: echo 1 > <prefix>0.pipe
    f.write("1\\n")
for _ in range(200):
    if os.path.exists(prefix + "0"):
        break
    time.sleep(0.05)
time.sleep(0.5)  # the file is written whole before the job reads it
with open(prefix + "0", "rb") as f:
    trace = pickle.load(f)
print("DUMPED", [(e["collective_seq_id"], e["state"]) for e in trace["entries"]], flush=True)
dist.all_reduce(t)  # and the job goes on
print("VALUE", t.cpu().tolist(), flush=True)
dist.destroy_process_group()
'''


def test_writing_to_the_dump_pipe_dumps_the_trace_and_the_job_goes_on(tmp_path):
    prefix = str(tmp_path / "trace_")
    script = tmp_path / "pipe.py"
    script.write_text(DUMP_PIPE)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "store"), prefix], capture_output=True,
                          text=True, timeout=120,
                          env=clean_env(TORCH_HCCL_TRACE_BUFFER_SIZE=8, TORCH_HCCL_ENABLE_MONITORING=1,
                                        TORCH_HCCL_DEBUG_INFO_TEMP_FILE=prefix, TORCH_HCCL_DEBUG_INFO_PIPE_FILE=prefix))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "DUMPED [(1, 'completed')]" in proc.stdout, proc.stdout
    assert "VALUE [1.0, 1.0, 1.0, 1.0]" in proc.stdout
    assert pathlib.Path(prefix + "0_py_traceback").exists()


def test_async_error_handling_2_aborts_the_group():
    torchrun("faults.py", 2, timeout=120, FAULT="stalled_peer", TORCH_HCCL_ASYNC_ERROR_HANDLING=2)


def test_heartbeat_monitor_dumps_an_idle_rank_and_never_ends_a_waiting_one(tmp_path):
    # As torch_npu's: the heartbeat beats while collectives are in flight (Note [The heartbeat beats while
    # collectives are in flight]); rank 0 sleeps past it and dumps, rank 1 waits in a collective past it and does not.
    prefix = str(tmp_path / "trace_")
    proc = torchrun("faults.py", 2, timeout=120, FAULT="idle_rank", GROUP_TIMEOUT_S=60, TORCH_HCCL_ENABLE_MONITORING=1,
                    TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC=2, TORCH_HCCL_DUMP_ON_TIMEOUT=1, TORCH_HCCL_TRACE_BUFFER_SIZE=100,
                    TORCH_HCCL_DEBUG_INFO_TEMP_FILE=prefix)
    assert "[Rank 0] First PG on this rank that detected no heartbeat of its watchdog." in proc.stderr, proc.stderr
    assert "[Rank 1] First PG" not in proc.stderr
    assert pathlib.Path(prefix + "0").exists()
    assert "time.sleep(5)" in pathlib.Path(prefix + "0_py_traceback").read_text()
    assert not pathlib.Path(prefix + "1").exists()


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
