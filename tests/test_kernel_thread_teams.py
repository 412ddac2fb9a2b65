"""Each kernel's thread team, on hosts of 2, 4 and 16 cores (VNPU_HOST_CORES).

The rule (runtime/include/vnpu/intra_op_threads.h; docs/architecture.md, "Intra-op threads
in stage 2") gives a kernel under 32768 elements one thread, a larger one cores - 1 beside a
host that keeps working, and one of 262144 elements or more every core while the host waits
for the device. Here it is checked end to end: real launches in a process that takes the
machine for one of `cores` cores, each kernel's team read from the profile (its Block Num,
as CANN's profiles give a kernel's block dim), and Inductor's npu settings from the same count.
"""

import json

import pytest

from conftest import run_python

_PROGRAM = """
import json, sys, torch, torch_npu
from torch.profiler import profile, ProfilerActivity

x = {name: torch.randn(n, device="npu") for name, n in
     (("small", 1024), ("medium", 100_000), ("large", 1_000_000))}
a = torch.randn(512, 512, device="npu")
for t in x.values():  # a first launch runs on the caller (Note [Argument errors raise at the call])
    t.add(1); t.mul(2)
a @ a
torch.npu.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    # Host working: under deterministic algorithms the rule reads the host as working always
    # (Note [Deterministic team sizes]), so the teams do not depend on this process's timing.
    torch.use_deterministic_algorithms(True)
    for t in x.values():
        t.add(1)
    a @ a
    torch.npu.synchronize()
    torch.use_deterministic_algorithms(False)
    # Host waiting: the stream sleeps 0.3 s, long after synchronize() blocks the host.
    torch.npu._sleep(300_000)
    x["medium"].mul(2)
    x["large"].mul(2)
    torch.npu.synchronize()
prof.export_chrome_trace(sys.argv[1])
from torch_npu._inductor.retarget import _npu_cpp_config
print("CPP_THREADS", _npu_cpp_config()["cpp.threads"])
"""


def _teams(tmp_path, cores):
    script, trace = tmp_path / "teams.py", tmp_path / "trace.json"
    script.write_text(_PROGRAM)
    proc = run_python(f"import runpy, sys; sys.argv = ['teams.py', {str(trace)!r}]; "
                      f"runpy.run_path({str(script)!r}, run_name='__main__')",
                      timeout=300, VNPU_HOST_CORES=cores)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kernels = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    teams = [(e["name"], int(e["args"]["block num"])) for e in kernels if "block num" in e.get("args", {})]
    cpp_threads = int(proc.stdout.split("CPP_THREADS")[1].split()[0])
    return teams, cpp_threads


@pytest.mark.parametrize("cores", [2, 4, 16])
def test_each_kernel_team_follows_the_rule_for_the_host_cores(tmp_path, cores):
    teams, cpp_threads = _teams(tmp_path, cores)
    working = max(1, cores - 1)
    assert teams == [
        ("add.Tensor", 1),        # 1K elements: serial, whatever the host does
        ("add.Tensor", working),  # 100K: leaves a core to the working host
        ("add.Tensor", working),  # 1M: the host is working, so it leaves that core too
        ("mm", working),          # a 512^3 GEMM, as its elementwise work (Note [The work of a GEMM])
        ("mul.Tensor", working),  # 100K with the host waiting: below the whole-machine bar
        ("mul.Tensor", cores),    # 1M with the host waiting: every core
    ]
    assert cpp_threads == working  # compiled npu kernels are generated for a working host


def test_a_bad_host_core_count_is_refused_at_the_first_device_use():
    proc = run_python("""
        import torch, torch_npu
        print("IMPORTED", flush=True)
        torch.ones(1, device="npu")
    """, VNPU_HOST_CORES="0")
    assert "IMPORTED" in proc.stdout and proc.returncode != 0
    assert "VNPU_HOST_CORES must be an integer between 1 and 1024" in proc.stderr
