"""Run under torchrun (2 ranks): faults end in errors, never hangs.

FAULT=mismatch (with TORCH_HCCL_DESYNC_DEBUG=1): the ranks all-reduce
tensors of different lengths; both must raise the mismatch, naming it, at
once rather than at the timeout.

FAULT=exited_peer: rank 1's process ends; rank 0's next all_reduce fails at
once with HCCL's EI0002, not at the group's timeout.
FAULT=wrong_devices: collectives given tensors on two devices are refused in
torch_npu's words, and the group goes on.
FAULT=stalled_peer: rank 1 stops calling collectives; rank 0's all_reduce
must fail within the group's timeout (4 s here, or HCCL_EXEC_TIMEOUT when that
is shorter) with torch_npu's watchdog text, at the next sync (or at wait() with
TORCH_HCCL_BLOCKING_WAIT=1), and destroy_process_group must return.
FAULT=idle_rank: rank 0 sleeps between two all_reduces while rank 1 waits in
the second; both finish.
Prints "RANK r OK"."""

import datetime
import os
import time

import torch
import torch.distributed as dist

import torch_npu  # noqa: F401

timeout = datetime.timedelta(seconds=int(os.environ.get("GROUP_TIMEOUT_S", "4")))
expected_ms = min(timeout.total_seconds(), float(os.environ.get("HCCL_EXEC_TIMEOUT") or 1e9)) * 1000
blocking = os.environ.get("TORCH_HCCL_BLOCKING_WAIT") == "1"
handling = os.environ.get("TORCH_HCCL_ASYNC_ERROR_HANDLING") or os.environ.get("HCCL_ASYNC_ERROR_HANDLING") or "1"
dist.init_process_group("hccl", timeout=timeout)
rank = dist.get_rank()
torch.npu.set_device(rank)
t = torch.ones(4, device="npu")
dist.all_reduce(t)  # a healthy one first
assert torch.equal(t.cpu(), torch.full((4,), 2.0))
fault = os.environ["FAULT"]
if fault == "mismatch":
    start = time.monotonic()
    bad = torch.ones(4 + rank, device="npu")
    try:
        dist.all_reduce(bad)
        bad.cpu()
        raise AssertionError("mismatched all_reduce returned")
    except RuntimeError as e:
        assert "Collective mismatch" in str(e), e
        assert "ALLREDUCE of 4 Float elements" in str(e) and "ALLREDUCE of 5 Float elements" in str(e), e
    assert time.monotonic() - start < 30
    print(f"RANK {rank} OK", flush=True)
    os._exit(0)  # the group is out of step now: leave without collective teardown
if fault == "sticky_error":
    # Rank 0's stream fails (a device-side index error) before the
    # collective: it still joins, so rank 1 is not left waiting; the poisoned
    # data reaches rank 1, and rank 0 gets its error at its next sync.
    x = torch.ones(1000, device="npu")
    x[torch.tensor([1], device="npu")]  # the signature validated: the next launch queues
    big = torch.ones(100000, device="npu")
    if rank == 0:
        big = big + x[torch.tensor([5000], device="npu")].sum() * 0
    start = time.monotonic()
    dist.all_reduce(big)
    try:
        value = big[0].item()
        assert rank == 1, "rank 0's error was lost"
        assert value != value, value  # NaN
    except RuntimeError as e:
        assert rank == 0 and "index 5000 is out of bounds" in str(e), e
    assert time.monotonic() - start < 10
    print(f"RANK {rank} OK", flush=True)
    os._exit(0)
if fault == "exited_peer":
    # Rank 1's process ends between collectives: rank 0's next all_reduce fails
    # at once with HCCL's code, long before the group's timeout.
    if rank == 1:
        print("RANK 1 OK", flush=True)
        os._exit(0)
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        t.cpu()
        raise AssertionError("a collective with an exited peer returned")
    except RuntimeError as e:
        assert "EI0002: remote rank 1" in str(e) and "exited before it reached step" in str(e), e
        assert "Watchdog caught collective operation timeout" not in str(e), e
    assert time.monotonic() - start < 30, time.monotonic() - start
    assert torch.isnan(t.cpu()).all(), t.cpu()
    print("RANK 0 OK", flush=True)
    os._exit(0)
if fault == "wrong_devices":
    # Tensors of one collective on two devices, refused in torch_npu's words before anything is sent.
    other = f"npu:{(rank + 1) % torch.npu.device_count()}"
    cases = [
        (lambda: dist.reduce_scatter(torch.zeros(4, device="npu"), [torch.zeros(4, device=other)] * 2),
         "Corresponding input/output tensors to reduce_scatter must all reside on the same device"),
        (lambda: dist.all_gather([torch.zeros(4, device=other)] * 2, torch.zeros(4, device="npu")),
         "Corresponding input/output tensors to scatter/gather must all reside on the same device"),
        (lambda: dist.all_to_all_single(torch.zeros(4, device=other), torch.zeros(4, device="npu")),
         "Tensors must be on same NPU device"),
    ]
    for call, message in cases:
        try:
            call()
            raise AssertionError(f"accepted tensors on two devices: {message}")
        except RuntimeError as e:
            assert message in str(e), e
    dist.all_reduce(t)  # the group goes on
    assert torch.equal(t.cpu(), torch.full((4,), 4.0))
    dist.destroy_process_group()
    print(f"RANK {rank} OK", flush=True)
    os._exit(0)
if fault == "idle_rank":
    # (TORCH_HCCL_ENABLE_MONITORING=1, a 2 s heartbeat, dumps on): rank 0 has nothing in flight for 5 s, so its
    # watchdog has no heartbeat and it dumps; rank 1 waits in an all_reduce all that time, which is a heartbeat.
    if rank == 0:
        time.sleep(5)
    dist.all_reduce(t)
    assert torch.equal(t.cpu(), torch.full((4,), 4.0))
    dist.destroy_process_group()
    print(f"RANK {rank} OK", flush=True)
    os._exit(0)
if fault == "stalled_peer":
    if rank == 1:
        time.sleep(12)  # never joins the second all_reduce
        print("RANK 1 OK", flush=True)
        os._exit(0)
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        if blocking:
            raise AssertionError("a blocking wait returned")
        t.cpu()
        raise AssertionError("a collective with a stalled peer returned")
    except RuntimeError as e:
        took = time.monotonic() - start
        assert "Watchdog caught collective operation timeout" in str(e), e
        assert "OpType=ALLREDUCE" in str(e) and f"Timeout(ms)={int(expected_ms)}" in str(e), e
        assert took < 20, took
    assert handling in ("0", "2") or blocking, "the process should have been taken down"
    # The failed collective's output is poisoned, not silently stale.
    assert torch.isnan(t.cpu()).all(), t.cpu()
    if handling == "2" and not blocking:
        start = time.monotonic()
        try:
            dist.all_reduce(t)
            raise AssertionError("an aborted group ran a collective")
        except RuntimeError as e:
            assert "ProcessGroupHCCL was aborted after a collective failed" in str(e), e
            assert "Watchdog caught collective operation timeout" in str(e), e
        assert time.monotonic() - start < 2
    dist.destroy_process_group()
    print("RANK 0 OK", flush=True)
