"""npu tensors across processes (torch_npu/multiprocessing/reductions.py, Note [Sharing npu
tensors between processes] in csrc/python/ipc_bindings.cpp): sent as IPC handles into the
sender's shared arena, the receiver's tensor aliases the sender's memory, as CUDA IPC does."""

from multiprocessing.reduction import ForkingPickler

import pytest
import torch

import torch_npu  # noqa: F401
from conftest import run_python


def test_without_a_shared_arena_sending_is_refused_with_what_to_do():
    # this process's device memory is private (no VNPU_SHARED_DEVICE_MEMORY)
    t = torch.arange(4.0, device="npu")
    with pytest.raises(RuntimeError, match=r"not in vNPU's\s+shared arena\). Set VNPU_SHARED_DEVICE_MEMORY=1 .*"
                                           r"tensor\.cpu\(\)"):
        ForkingPickler.dumps(t)


def test_refusals_match_torchs():
    t = torch.arange(4.0, device="npu")
    with pytest.raises(RuntimeError, match="Cannot pickle NPU storage; try pickling a NPU tensor instead"):
        ForkingPickler.dumps(t.untyped_storage())
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor which requires_grad"):
        ForkingPickler.dumps(t.requires_grad_() * 2)
    with pytest.raises(RuntimeError, match=r"Cannot share a torch.npu.Event"):
        ForkingPickler.dumps(torch.npu.Event())
    for storage in (torch.UntypedStorage(4, device="meta"), torch.UntypedStorage(4)):  # as _share_cuda_ words it
        with pytest.raises(RuntimeError, match="_share_npu_: only available on NPU"):
            storage._share_npu_()


SHARING = """
    import torch, torch_npu
    import torch.multiprocessing as mp

    def child(inbox, outbox):
        view, param, empty = inbox.get()
        assert view.device.type == "npu" and view.tolist() == [2.0, 3.0, 4.0, 5.0], view
        assert type(param) is torch.nn.Parameter and param.requires_grad and param.shape == (3, 3)
        assert empty.numel() == 0 and empty.device.type == "npu"
        view.mul_(10)                                  # the parent's memory
        made_here = torch.full((5,), 7.0, device="npu")  # and the other way round
        outbox.put((float(param.detach().sum()), made_here))
        assert inbox.get() == "seen"                   # keep made_here alive while the parent reads it
        assert made_here.tolist() == [7.0, 7.0, -1.0, 7.0, 7.0]

    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        inbox, outbox = ctx.Queue(), ctx.Queue()
        base = torch.arange(8.0, device="npu")
        param = torch.nn.Parameter(torch.ones(3, 3, device="npu"))
        proc = ctx.Process(target=child, args=(inbox, outbox))
        proc.start()
        inbox.put((base[2:6], param, torch.empty(0, device="npu")))
        total, from_child = outbox.get(timeout=60)
        assert total == 9.0
        assert base.tolist() == [0.0, 1.0, 20.0, 30.0, 40.0, 50.0, 6.0, 7.0], base
        assert from_child.device.type == "npu" and from_child.tolist() == [7.0] * 5
        from_child[2] = -1.0
        torch.npu.synchronize()
        inbox.put("seen")
        proc.join(60)
        assert proc.exitcode == 0, proc.exitcode
        print("ok")
"""


def test_spawned_processes_share_npu_tensors_both_ways(tmp_path):
    script = tmp_path / "share.py"
    import textwrap
    script.write_text(textwrap.dedent(SHARING))
    proc = run_python(f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')", timeout=180,
                      VNPU_SHARED_DEVICE_MEMORY="1")
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]


def test_views_of_one_storage_open_it_once_and_sparse_tensors_travel_by_their_parts():
    # Pickled and loaded in one process: each view's handle names the same
    # storage, which the receiver opens once (torch's shared_cache); a sparse
    # npu tensor goes as its indices and values, each an npu tensor; a meta
    # storage is refused in torch's words.
    proc = run_python("""
        import pickle, torch, torch_npu
        from multiprocessing.reduction import ForkingPickler
        from torch_npu.multiprocessing import reductions

        def round_trip(obj):
            return pickle.loads(ForkingPickler.dumps(obj))

        base = torch.arange(8.0, device="npu")
        a, b = round_trip(base[1:3]), round_trip(base[4:])
        assert (a.tolist(), b.tolist()) == ([1.0, 2.0], [4.0, 5.0, 6.0, 7.0])
        assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        a.fill_(-1)
        assert base.tolist() == [0.0, -1.0, -1.0, 3.0, 4.0, 5.0, 6.0, 7.0]
        rebuild, args = reductions._npu_reduce_tensor(base[2:6])
        assert rebuild is reductions.rebuild_npu_tensor and (tuple(args[1]), tuple(args[2]), args[3]) == ((4,), (1,), 2)

        sparse = torch.tensor([0.0, 2.0, 0.0, 3.0], device="npu").to_sparse()
        back = round_trip(sparse)
        assert back.is_sparse and back.device.type == "npu" and back.to_dense().tolist() == [0.0, 2.0, 0.0, 3.0]
        try:
            ForkingPickler.dumps(torch.UntypedStorage(4, device="meta"))
            raise AssertionError("meta storage pickled")
        except RuntimeError as e:
            assert "Cannot pickle meta storage" in str(e), e
        print("ok")
    """, VNPU_SHARED_DEVICE_MEMORY="1")
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]


RETURN_RIGHT_AFTER_PUT = """
        import time
        import torch, torch_npu
        import torch.multiprocessing as mp

        def child(rank, queue):
            queue.put((rank, (torch.arange(4.0, device="npu") * (rank + 1)).cpu()))

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            queue = ctx.Queue()
            procs = [ctx.Process(target=child, args=(r, queue)) for r in range(2)]
            for p in procs:
                p.start()
            time.sleep(1.0)  # the children have long returned from child()
            got = dict(queue.get(timeout=60) for _ in procs)
            for p in procs:
                p.join(30)
            assert {r: t.tolist() for r, t in got.items()} == {0: [0.0, 1.0, 2.0, 3.0], 1: [0.0, 2.0, 4.0, 6.0]}
            assert [p.exitcode for p in procs] == [0, 0]
            start = time.monotonic()
            unread = ctx.Queue()
            p = ctx.Process(target=child, args=(2, unread))  # nobody reads: the wait is bounded
            p.start()
            p.join(60)
            assert p.exitcode == 0 and time.monotonic() - start < 40, (p.exitcode, time.monotonic() - start)
            print("ok")
"""


def test_a_child_that_returns_right_after_put_still_hands_over_its_tensor(tmp_path):
    # Note [A producer outlives its shared descriptors] (torch_npu/multiprocessing/_exit.py): the CPU
    # tensor's file descriptor is fetched from the child when the parent reads, here well after the
    # child's function has returned; the child waits at exit until it was fetched. Without torch_npu's
    # wait the read fails (FileNotFoundError / ConnectionResetError).
    import textwrap
    script = tmp_path / "return_right_after_put.py"
    script.write_text(textwrap.dedent(RETURN_RIGHT_AFTER_PUT))
    proc = run_python(f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')", timeout=180)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]
