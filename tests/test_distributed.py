"""The hccl backend: every collective under torchrun (2-4 ranks, across
hosts), and the single-process API: Options, registration, and the errors."""

import datetime
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import torch_npu
from conftest import clean_env
from torchrun_jobs import free_port, torchrun


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


def test_communicator_creation_is_logged_and_sub_groups_derive_from_the_world():
    # torch_npu's INFO lines on "torch.distributed"; ROOTINFO_SUBCOMM_ENABLE's
    # groups take their ranks' hosts from the world group's, by world rank.
    torchrun("sub_comm.py", 3, VNPU_HCCL_HOST="host{rank//2}")


def test_host_identity_patterns():
    from torch_npu.distributed import _host_identity
    assert _host_identity("node", 3) == "node"
    assert _host_identity("host{rank}", 3) == "host3"
    assert [_host_identity("h{rank//2}", r) for r in range(4)] == ["h0", "h0", "h1", "h1"]
    with pytest.raises(ValueError, match=r"only \{rank\} and \{rank//K\}"):
        _host_identity("h{local_rank}", 0)
    with pytest.raises(ValueError):
        _host_identity("h{rank//0}", 0)


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
    with pytest.raises(TypeError, match="should be an int or a string, got float"):
        opts.hccl_config = {"hccl_buffer_size": 2.5}
    opts.op_timeout = datetime.timedelta(seconds=5)
    assert opts._timeout == datetime.timedelta(seconds=5)
    assert opts.hccl_config == {"hccl_buffer_size": 200, "group_name": "tp"}  # a rejected value changed nothing


def _failing_python(code):
    """Runs `code` in a fresh interpreter that must fail; returns its stderr."""
    run = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode != 0, run.stdout
    return run.stderr


def _group_with(config):
    options = torch_npu._C._distributed_c10d.ProcessGroupHCCL.Options()
    options.hccl_config = config
    return torch_npu._C._distributed_c10d.ProcessGroupHCCL(dist.HashStore(), 0, 1, options)


@pytest.mark.parametrize("config, message", [
    ({"group_name": 123}, "Value type of group_name should be string."),
    ({"hccl_buffer_size": "200"}, "Value type of hccl_buffer_size should be int."),
    ({"hccl_buffer_size": -1}, "Value type of hccl_buffer_size should be int."),
    ({"hccl_buffer_size": 0}, "Value of hccl_buffer_size should be greater than 0"),
    ({"qos_traffic_class": "1"}, "Value type of qos_traffic_class should be int."),
    ({"qos_traffic_class": 256}, r"Value of qos_traffic_class should be in \[0, 255\]."),
    ({"qos_service_level": 8}, r"Value of qos_service_level should be in \[0, 7\]."),
    ({"hccl_sdma_qos": "1"}, "Value type of hccl_sdma_qos should be int."),
    ({"hccl_op_expansion_mode": "1"}, "Value type of hccl_op_expansion_mode should be int."),
    ({"hccl_exec_timeout": "1"}, "Value type of hccl_exec_timeout should be int."),
    ({"hccl_exec_timeout": 2**31}, r"Value type of hccl_exec_timeout exceeds INT32_MAX\(2147483647\)."),
    ({"hccl_algo": 1}, "Value type of hccl_algo should be string."),
    ({"hccl_retry_enable": 1}, "Value type of hccl_retry_enable should be string."),
    ({"hccl_retry_params": 1}, "Value type of hccl_retry_params should be string."),
    ({"hccl_buffer_name": 1}, "Value type of hccl_buffer_name should be string."),
])
def test_hccl_config_is_checked_when_the_group_is_made(config, message):
    # As torch_npu: the assignment takes the dict, the communicator's creation refuses it.
    with pytest.raises(RuntimeError, match=message) as raised:
        _group_with(config)
    assert "ERR02002 DIST invalid type" in str(raised.value) or "ERR02003" in str(raised.value)


def test_hccl_config_long_strings_are_cut_to_hccls_fields(capfd):
    config = {"hccl_algo": "a" * 1700, "hccl_retry_enable": "L0:0," * 20, "group_name": "g" * 200,
              "hccl_exec_timeout": 500, "hccl_buffer_size": 300}
    pg = _group_with(config)  # warns on stderr, as torch_npu's communicator creation does
    assert ("The length of hccl_algo has exceeded the limit HCCL_COMM_ALGO_MAX_LENGTH(1600) which will be "
            "truncated to HCCL_COMM_ALGO_MAX_LENGTH - 1.") in capfd.readouterr().err
    got = pg.options.hccl_config
    assert len(got["hccl_algo"]) == 1599 and len(got["hccl_retry_enable"]) == 49 and len(got["group_name"]) == 127
    assert got["hccl_exec_timeout"] == 500 and got["hccl_buffer_size"] == 300
    t = torch.ones(3, device="npu")
    pg.allreduce([t]).wait()
    assert torch.equal(t.cpu(), torch.ones(3))


def test_groups_naming_one_hccl_buffer_share_its_stream():
    a = _group_with({"hccl_buffer_name": "shared"})
    b = _group_with({"hccl_buffer_name": "shared"})
    c = _group_with({"hccl_buffer_name": "other"})
    npu0 = torch.device("npu:0")
    assert a.get_coll_stream_id(npu0) == b.get_coll_stream_id(npu0) != c.get_coll_stream_id(npu0)


def test_hccl_exec_timeout_bounds_the_groups_collectives():
    # A recv from itself whose send never comes: hccl_exec_timeout (2 s) beats
    # the group's 300 s, and the watchdog takes the process down saying so.
    code = ("import datetime, torch, torch_npu, torch.distributed as dist\n"
            "o = torch_npu._C._distributed_c10d.ProcessGroupHCCL.Options()\n"
            "o.hccl_config = {'hccl_exec_timeout': 2}\n"
            "o._timeout = datetime.timedelta(seconds=300)\n"
            "pg = torch_npu._C._distributed_c10d.ProcessGroupHCCL(dist.HashStore(), 0, 1, o)\n"
            "pg.recv([torch.zeros(2, device='npu')], 0, 3).wait()\n"
            "torch.npu.synchronize()\n")
    stderr = _failing_python(code)
    assert "OpType=RECV, NumelIn=0, NumelOut=2, Timeout(ms)=2000) ran for" in stderr, stderr[-2000:]


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
    with pytest.raises(RuntimeError, match="Unsupported data type at::kUInt16"):
        pg.allreduce([torch.ones(1, dtype=torch.uint16, device="npu")])
    with pytest.raises(RuntimeError, match="Tensors must be NPU"):
        pg.allreduce([torch.ones(1)])
    with pytest.raises(RuntimeError, match="does not support recv"):
        pg.recv_anysource([torch.ones(1, device="npu")], 0)
    assert pg.get_hccl_comm_name(0).startswith("hccl_comm_")


def test_communication_stream_ids_name_real_streams():
    pg = torch_npu._C._distributed_c10d.ProcessGroupHCCL(dist.HashStore(), 0, 1, datetime.timedelta(seconds=30))
    coll = pg.get_coll_stream_id(torch.device("npu:1"))
    assert coll == pg.get_coll_stream_id(torch.device("npu:1"))
    assert pg.get_p2p_stream_id(torch.device("npu:1"), 0) == -1  # no send or recv with rank 0 yet
    with torch.npu.device(1):
        got = torch.zeros(2, device="npu:1")
        recv = pg.recv([got], 0, 0)
        pg.send([torch.ones(2, device="npu:1")], 0, 0).wait()
        recv.wait()
    assert pg.get_p2p_stream_id(torch.device("npu:1"), 0, 1) == coll  # P2P starts on the same stream
    with torch.npu.device(1):
        assert pg._get_stream_id(False) == pg._get_stream_id(True, 0) == coll
    stream = torch.npu.Stream(stream_id=coll, device_index=1, device_type=torch.npu.current_stream().device_type)
    assert stream.npu_stream  # a stream of the device, usable as any other
    t = torch.ones(2, device="npu:1")
    pg.allreduce([t]).wait()
    stream.synchronize()
    with pytest.raises(RuntimeError, match="expected an npu device"):
        pg.get_coll_stream_id(torch.device("cpu"))


def test_a_rank_sends_to_itself():
    pg = torch_npu._C._distributed_c10d.ProcessGroupHCCL(dist.HashStore(), 0, 1, datetime.timedelta(seconds=30))
    got = torch.zeros(2, 3, device="npu")
    recv = pg.recv([got], 0, 7)  # posted first: it waits for the send
    pg.send([torch.arange(6.0, device="npu").view(2, 3)], 0, 7).wait()
    recv.wait()
    assert torch.equal(got.cpu(), torch.arange(6.0).view(2, 3))
    # sizes that disagree fail the pair, and a failed P2P takes the process down, as any collective's error
    code = ("import datetime, torch, torch_npu, torch.distributed as dist\n"
            "pg = torch_npu._C._distributed_c10d.ProcessGroupHCCL(dist.HashStore(), 0, 1, "
            "datetime.timedelta(seconds=30))\n"
            "small = pg.recv([torch.zeros(2, device='npu')], 0, 8)\n"
            "pg.send([torch.ones(3, device='npu')], 0, 8)\n"
            "small.wait()\n"
            "torch.npu.synchronize()\n")
    stderr = _failing_python(code)
    assert "a send of 12 bytes from this rank to itself met a recv of 8 bytes (tag 8)" in stderr, stderr[-2000:]


def test_a_group_keeps_the_options_it_was_made_with():
    options = torch_npu._C._distributed_c10d.ProcessGroupHCCL.Options()
    options.hccl_config = {"hccl_buffer_size": 300, "group_name": "custom"}
    pg = torch_npu._C._distributed_c10d.ProcessGroupHCCL(dist.HashStore(), 0, 1, options)
    options.hccl_config = {"hccl_buffer_size": 200}  # reused for another group: this one is unchanged
    assert pg.options.hccl_config == {"hccl_buffer_size": 300, "group_name": "custom"}


def test_communicator_names_are_set_once():
    def group():
        return torch_npu._C._distributed_c10d.ProcessGroupHCCL(dist.HashStore(), 0, 1, datetime.timedelta(seconds=30))
    assert torch_npu.distributed._is_support_hccl_comm_name()
    named = group()
    named._set_hccl_comm_name("tp")
    named._set_hccl_comm_name("tp")  # the same name again: accepted
    assert named.get_hccl_comm_name(0) == named.get_hccl_comm_name(3, init_comm=False) == "tp"
    with pytest.raises(RuntimeError, match="already set the name and cannot be duplicated, Invalid hcclCommName:dp"):
        named._set_hccl_comm_name("dp")
    for bad in ("", "x" * 128):
        with pytest.raises(RuntimeError, match="The length of the name must be between 1 and 127"):
            group()._set_hccl_comm_name(bad)
    group()._set_hccl_comm_name("x" * 127)
    asked = group()
    generated = asked.get_hccl_comm_name(0)  # the first ask fixes the generated name
    assert generated.startswith("hccl_comm_")
    with pytest.raises(RuntimeError, match="current hcclCommName:" + generated):
        asked._set_hccl_comm_name("late")
    with pytest.raises(RuntimeError, match="Invalid rank -1"):
        asked.get_hccl_comm_name(-1)


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


def test_nslb_records_the_first_collectives_data_volumes(tmp_path):
    # As torch_npu for the network's load balancer: per rank, the first
    # NSLB_MAX_RECORD_NUM operations' "<op> <bytes> <rank>", then an end file.
    nslb = tmp_path / "nslb"
    torchrun("nslb.py", 2, NSLB_CP=str(nslb), NSLB_MAX_RECORD_NUM="3", HCCL_ALGO="level0:NA;level1:ring")
    names = sorted(p.name for p in nslb.iterdir())
    assert sum(n.startswith("end_127.0.0.1_") for n in names) == 2, names
    # named by the world group's communicator name on each rank
    assert [n for n in names if not n.startswith("end_")] == [
        "127.0.0.1_hccl_comm_0_0_0.log", "127.0.0.1_hccl_comm_0_1_1.log"], names
    for rank in range(2):
        lines = (nslb / f"127.0.0.1_hccl_comm_0_{rank}_{rank}.log").read_text().splitlines()
        assert lines == ["HCCL_ALGO=level0:NA;level1:ring"] + [f"allreduce 40 {rank}"] * 3, lines


def test_status_files_record_each_ranks_last_collective(tmp_path):
    # As torch_npu's TORCH_HCCL_STATUS_SAVE_ENABLE: one JSON file per rank in a
    # directory made on the way, written whole, the world group's last collective ended.
    import json
    target = tmp_path / "a" / "b"
    torchrun("nslb.py", 2, TORCH_HCCL_STATUS_SAVE_ENABLE="1", TORCH_HCCL_STATUS_SAVE_PATH=str(target))
    for rank in range(2):
        files = sorted(target.glob(f"torch_hccl_status-{rank}_127.0.0.1_{rank}_2_*.log"))
        assert files, sorted(p.name for p in target.iterdir())
        data = json.loads(files[-1].read_text())
        assert data["is_master"] == (rank == 0) and data["exception_message"] == ""
        assert data["last_comm_op"] == [{"seq": 4, "op_type": "ALLREDUCE", "pg_id": "0",
                                         "comm_ids": f"hccl_comm_0_{rank}", "status": "end"}], data
    assert not list(target.glob("*.tmp"))
