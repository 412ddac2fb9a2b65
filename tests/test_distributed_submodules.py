"""torch_npu.distributed's submodules (nn.functional, fsdp, pipelining, run,
rendezvous, rpc, tensor) on 2 ranks over hccl."""

import subprocess
import sys

from conftest import clean_env, run_python
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


def test_torch_npu_run_main_hands_torchrun_the_parallel_rendezvous():
    # _main as real torch_npu's: torch_run.run gets the "parallel" backend and
    # the master's endpoint, or the endpoint given (a caller's own Namespace too).
    import argparse
    from unittest.mock import patch

    from torch_npu.distributed import run
    with patch("torch_npu.distributed.run.torch_run.run") as launched, \
            patch("torch_npu.distributed.rendezvous._rendezvous_init"):
        run._main(["--master_port=12345", "s.py"])
        args = launched.call_args[0][0]
        assert (args.rdzv_backend, args.rdzv_endpoint) == ("parallel", "127.0.0.1:12345")
        given = argparse.Namespace(nproc_per_node=1, master_addr="localhost", master_port=1, rdzv_backend=None,
                                   rdzv_endpoint="elsewhere:54321")
        with patch("torch_npu.distributed.run.parse_args", return_value=given):
            run._main(None)
        args = launched.call_args[0][0]
        assert (args.rdzv_backend, args.rdzv_endpoint) == ("parallel", "elsewhere:54321")


def test_the_torch_npu_run_command_is_torch_npus_launcher():
    from importlib.metadata import entry_points
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "torch_npu_run"]
    assert script.value == "torch_npu.distributed.run:_main"  # the "parallel" rendezvous, as real torch_npu's


def test_parallel_urls_rendezvous_right_after_import_torch_npu():
    # A worker's own rendezvous("parallel://...") works after `import torch_npu` alone (real torch_npu's
    # sample_torch_npu_run_store.py); the rendezvous module, which loads torchelastic, is imported then.
    code = (
        "import sys, torch, torch_npu\n"
        "assert 'torch_npu.distributed.rendezvous' not in sys.modules\n"
        "from torch.distributed.rendezvous import rendezvous\n"
        f"store, rank, world = next(rendezvous('parallel://127.0.0.1:{free_port()}?rank=0&world_size=1'))\n"
        "store.set('k', 'v')\n"
        "assert (rank, world, store.get('k')) == (0, 1, b'v')\n"
        "print('OK')\n")
    proc = run_python(code)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-4000:]


def test_torch_npu_run_parse_args():
    code = (
        "import torch_npu\n"
        "from torch_npu.distributed.run import parse_args\n"
        "a = parse_args(['--nproc_per_node=2', '--enable_tiered_parallel_tcpstore=true', 's.py', '--x'])\n"
        "assert (a.enable_tiered_parallel_tcpstore, a.training_script, a.training_script_args) == "
        "('true', 's.py', ['--x'])\n"
        "assert parse_args(['s.py']).enable_tiered_parallel_tcpstore == 'false'\n"
        "print('OK')\n")
    proc = run_python(code)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-4000:]


def test_rpc_with_npu_tensors_over_npu_tensorpipe():
    # 3 workers: Python calls, builtins, RRefs, async execution, distributed
    # autograd and a RemoteModule, each against the same computation done
    # locally; refused device mappings in TensorPipe's words.
    torchrun("rpc_npu.py", 3, timeout=240)


def test_npu_tensorpipe_options_and_device_map_checks():
    import pytest
    import torch
    import torch.distributed.rpc as rpc

    import torch_npu  # noqa: F401
    from torch_npu.distributed.rpc import backend_registry
    from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions, _to_device, _to_device_map

    assert rpc.BackendType.NPU_TENSORPIPE.name == "NPU_TENSORPIPE"
    options = NPUTensorPipeRpcBackendOptions(num_worker_threads=4, device_maps={"w1": {"npu:0": 1}})
    options.set_device_map("w1", {"npu:1": "npu:2"})
    assert options.device_maps == {"w1": {torch.device("npu:0"): torch.device("npu:1"),
                                          torch.device("npu:1"): torch.device("npu:2")}}
    with pytest.raises(ValueError, match="only supports 1-to-1 mapping, trying to map npu:0 to npu:3 and npu:1"):
        options.set_device_map("w1", {"npu:0": "npu:3"})
    with pytest.raises(ValueError, match="only supports 1-to-1 mapping, trying to map npu:2 and npu:0 to npu:1"):
        _to_device_map({"npu:0": "npu:1", "npu:2": "npu:1"})
    with pytest.raises(ValueError, match="expect a list of npu devices, but got device type cpu"):
        _to_device("cpu")
    options.set_devices(["npu:0", "npu:1"])
    assert options.devices == [torch.device("npu:0"), torch.device("npu:1")]
    counts = {"w0": {"npu": 2}, "w1": {"npu": 2}}
    npu = torch.device
    backend_registry._validate_device_maps(["w0", "w1"], counts, {"w0": {"w1": {npu("npu:0"): npu("npu:1")}},
                                                                  "w1": {}}, {"w0": [], "w1": []})
    with pytest.raises(ValueError, match="has target devices with invalid indices"):
        backend_registry._validate_device_maps(["w0", "w1"], counts, {"w0": {"w1": {npu("npu:0"): npu("npu:5")}},
                                                                      "w1": {}}, {"w0": [], "w1": []})
    with pytest.raises(ValueError, match="invalid target node names"):
        backend_registry._validate_device_maps(["w0"], {"w0": {"npu": 2}}, {"w0": {"w9": {}}}, {"w0": []})


def _member_and_newcomer(code):
    """Runs ``code`` as worker 0 (the member) and worker 1 (which joins and prints OK), 150 s at most."""
    port = str(free_port())
    env = clean_env(OMP_NUM_THREADS=1)
    first = subprocess.Popen([sys.executable, "-c", code, "0", port], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        second = subprocess.run([sys.executable, "-c", code, "1", port], env=env, capture_output=True, text=True,
                                timeout=150)
        out, err = first.communicate(timeout=150)
    finally:
        first.kill()
    assert second.returncode == 0 and "OK" in second.stdout, second.stderr[-4000:]
    assert first.returncode == 0, err[-4000:]


def test_npu_tensorpipe_workers_join_a_dynamic_group():
    # init_rpc without world_size: the second worker starts its agent, asks the
    # first for its device maps over rpc, checks them and announces itself
    # (backend_registry._set_devices_and_reverse_device_map).
    code = """
import os, sys, time
import torch, torch_npu
import torch.distributed.rpc as rpc
from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions

rank, port = int(sys.argv[1]), sys.argv[2]
options = NPUTensorPipeRpcBackendOptions(num_worker_threads=4, init_method=f"tcp://127.0.0.1:{port}")
if rank == 1:
    time.sleep(1)  # the first member is in the group
rpc.init_rpc(f"w{rank}", rank=rank, backend=rpc.BackendType.NPU_TENSORPIPE, rpc_backend_options=options)
if rank == 1:
    assert rpc.rpc_sync("w0", torch.add, args=(torch.ones(2), 1)).tolist() == [2.0, 2.0]
    print("OK")
else:
    time.sleep(6)  # w1 joins, calls and leaves
rpc.shutdown()
"""
    _member_and_newcomer(code)


def test_a_worker_with_a_device_map_joins_a_dynamic_group():
    # The newcomer maps its npu:0 to the member's npu:1: its tensor arrives
    # there, and the reply comes back to npu:0 by the reverse of that map.
    code = """
import sys, time
import torch, torch_npu
import torch.distributed.rpc as rpc
from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions

def where_and_plus_one(t):
    return str(t.device), t + 1

rank, port = int(sys.argv[1]), sys.argv[2]
options = NPUTensorPipeRpcBackendOptions(num_worker_threads=4, init_method=f"tcp://127.0.0.1:{port}", rpc_timeout=60)
if rank == 1:
    options.set_device_map("w0", {"npu:0": "npu:1"})
    time.sleep(1)  # the first member is in the group
rpc.init_rpc(f"w{rank}", rank=rank, backend=rpc.BackendType.NPU_TENSORPIPE, rpc_backend_options=options)
if rank == 1:
    device, out = rpc.rpc_sync("w0", where_and_plus_one, args=(torch.arange(3.0, device="npu:0"),))
    assert device == "npu:1", device
    assert out.device == torch.device("npu:0") and out.tolist() == [1.0, 2.0, 3.0], out
    print("OK")
else:
    time.sleep(8)  # w1 joins, calls and leaves
rpc.shutdown()
"""
    _member_and_newcomer(code)


def test_parallel_store_is_a_store_under_torch_npus_api():
    # Real torch_npu's constructor (positional order included), a server and
    # a client in one process, the Store API between them, and its names.
    from datetime import timedelta

    import pytest
    import torch.distributed as dist

    import torch_npu
    from torch_npu.distributed import ParallelStore

    assert torch_npu.ParallelStore is ParallelStore is torch_npu._C._distributed_c10d.ParallelStore
    server = ParallelStore("127.0.0.1", 0, 2, False, -1, True, False, timedelta(seconds=30), False)
    client = ParallelStore("127.0.0.1", server.port, 2, is_server=False, timeout=timedelta(seconds=30))
    assert isinstance(server, dist.Store) and isinstance(client, dist.TCPStore)
    server.set("first_key", "first_value")
    assert client.get("first_key") == b"first_value"
    assert client.add("n", 3) == 3 and server.add("n", 4) == 7
    client.wait(["first_key"])
    prefixed = dist.PrefixStore("/worker/attempt_0", client)
    prefixed.set("k", "v")
    assert server.get("/worker/attempt_0/k") == b"v"
    # A set is acknowledged, as ParallelStore's is (TCPStore's is not): right
    # after it returns, every user of the store sees the key.
    for i in range(200):
        before = server.num_keys()
        client.set(f"acked/{i}", "v") if i % 2 else client.multi_set([f"acked/{i}"], ["v"])
        assert server.num_keys() == before + 1, i
    tiered = ParallelStore("127.0.0.1", server.port, enable_tiered=True, timeout=5000)  # ms, as the C++ binding
    assert tiered.enable_tiered and tiered.get("first_key") == b"first_value"
    with pytest.raises(ValueError, match="port must have value from 0 to 65535"):
        ParallelStore("127.0.0.1", 70000)
    with pytest.raises(TypeError, match="timeout should be a datetime.timedelta"):
        ParallelStore("127.0.0.1", server.port, timeout="soon")
    # A worker's rank 0 hosting the store (not an agent's) returns before the
    # other users connect, wait_workers or not, as real ParallelStore does.
    import os
    import time

    from torch_npu.distributed.rendezvous import _create_c10d_store, _torchelastic_use_agent_store
    started = time.monotonic()
    alone = ParallelStore("127.0.0.1", 0, 4, is_server=True, timeout=timedelta(seconds=60), wait_workers=True)
    assert time.monotonic() - started < 30 and alone.add("x", 1) == 1
    assert not _torchelastic_use_agent_store() or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    assert isinstance(_create_c10d_store("127.0.0.1", 0, 0, 2, timedelta(seconds=60)), ParallelStore)
    with pytest.raises(ValueError, match="port must have value from 0 to 65535"):
        _create_c10d_store("127.0.0.1", 70000, 0, 2, timedelta(seconds=60))


def test_parallel_rendezvous_refuses_incomplete_urls_and_endpoints():
    import pytest
    from torch.distributed.elastic.rendezvous.api import RendezvousParameters

    from torch_npu.distributed.rendezvous import _create_parallel_handler, _parallel_rendezvous_handler

    prefix = "Error initializing torch_npu.distributed using parallel:// rendezvous: "
    for url, missing in (("parallel://h?rank=0&world_size=1", "port number missing"),
                         ("parallel://h:1?world_size=1", "rank parameter missing"),
                         ("parallel://h:1?rank=0", "world size parameter missing")):
        with pytest.raises(ValueError) as refused:
            next(_parallel_rendezvous_handler(url))
        assert str(refused.value) == prefix + missing

    def params(endpoint, **config):
        return RendezvousParameters("parallel", endpoint, "run", 2, 2, **config)

    with pytest.raises(ValueError, match="rank is absent in RendezvousParameters"):
        _create_parallel_handler(params("h:1"))
    with pytest.raises(ValueError, match="endpoint is absent in RendezvousParameters"):
        _create_parallel_handler(params(" ", rank=0))
    with pytest.raises(ValueError, match="Port is absent in endpoint: h"):
        _create_parallel_handler(params("h", rank=0))
    handler = _create_parallel_handler(params("h:29400", rank=1, timeout=5))
    assert (handler.get_backend(), handler.use_agent_store, handler.get_run_id()) == ("parallel", True, "run")
    assert (handler.master_addr, handler.master_port, handler.rank, handler.world_size) == ("h", 29400, 1, 2)
    assert handler.timeout.total_seconds() == 5 and not handler.is_closed() and handler.num_nodes_waiting() == 0
