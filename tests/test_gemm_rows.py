"""Note [GEMMs split by rows] (csrc/launch/gemm_rows.h): a queued GEMM that
the intra-op rule gives two threads runs as row parts on the stream worker
and vNPU's helper threads. Its values must be cpu eager's, bit for bit, for
mm and addmm with every bias shape, and out= and views.

The split happens only while the host waits for the device (the rule), so
each case queues its GEMMs behind an external event and then synchronizes,
in a fresh process: the helper team (threads named vnpu-gemm) is made at
the first split."""

import os
import subprocess
import sys
import textwrap

SCRIPT = r"""
import os, threading, time
import torch, torch_npu

def helpers():
    names = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/comm") as f:
            names.append(f.read().strip())
    return names.count("vnpu-gemm")

torch.manual_seed(0)
cases = []
for (m, k, n) in [(256, 256, 256), (320, 320, 320), (256, 512, 256), (300, 200, 150), (257, 129, 65)]:
    a, b = torch.randn(m, k), torch.randn(k, n)
    for bias in (torch.randn(n), torch.randn(1, n), torch.randn(m, n), torch.randn(m, 1), torch.tensor(0.5)):
        cases.append((a, b, bias))
inputs = [(a.npu(), b.npu(), bias.npu()) for a, b, bias in cases]
side = torch.npu.Stream()
torch.npu.ExternalEvent().record(side)  # the side stream's worker exists from here
torch.npu.synchronize()
before = helpers()

gate = torch.npu.ExternalEvent()
gate.wait(torch.npu.current_stream())
results = []
for a, b, bias in inputs:
    out = torch.empty(a.shape[0], b.shape[1], device="npu")
    wide = torch.zeros(a.shape[0], b.shape[1] * 2, device="npu")
    results.append((a @ b, torch.addmm(bias, a, b, beta=0.5, alpha=2.0), torch.mm(a, b, out=out),
                    torch.addmm(bias, a, b, out=wide[:, ::2])))
opener = threading.Thread(target=lambda: (time.sleep(0.3), gate.record(side)))
opener.start()
torch.npu.synchronize()  # the host waits: queued GEMMs of 256^3 and more take two threads
opener.join()

bad = []
for (a, b, bias), (mm, addmm, mm_out, addmm_view) in zip(cases, results):
    want = a @ b
    if not torch.equal(mm.cpu(), want) or not torch.equal(mm_out.cpu(), want):
        bad.append(("mm", tuple(a.shape), tuple(b.shape)))
    if not torch.equal(addmm.cpu(), torch.addmm(bias, a, b, beta=0.5, alpha=2.0)):
        bad.append(("addmm", tuple(a.shape), tuple(bias.shape)))
    if not torch.equal(addmm_view.cpu(), torch.addmm(bias, a, b)):
        bad.append(("addmm into a view", tuple(a.shape), tuple(bias.shape)))
print("bad", bad)
print("helpers before", before, "after", helpers())
"""


def test_queued_gemms_split_by_rows_equal_cpu_eager_bit_for_bit():
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "bad []" in lines, done.stdout
    if (os.cpu_count() or 1) >= 2:  # the split ran: the helper team (a thread per core but one) was made
        assert f"helpers before 0 after {os.cpu_count() - 1}" in lines, done.stdout


LONG_SCRIPT = r"""
import time
import torch, torch_npu

torch.manual_seed(0)
cases = []
for (m, k, n) in [(1024, 512, 1024), (1000, 1024, 600)]:
    a, b = torch.randn(m, k), torch.randn(k, n)
    cases.append((a, b, torch.randn(m, n), torch.randn(n)))
inputs = [tuple(t.npu() for t in case) for case in cases]
torch.npu.synchronize()
results = []
for a, b, bias_rows, bias in inputs:
    # Queued while the host is busy: each GEMM starts on threads - 1 and asks
    # again after its first rows (the host is still busy for the first ones,
    # blocked in synchronize for the last).
    results.append((a @ b, torch.addmm(bias_rows, a, b, beta=0.5, alpha=2.0), torch.addmm(bias, a, b)))
end = time.perf_counter() + 0.02
while time.perf_counter() < end:
    pass
torch.npu.synchronize()
bad = []
for (a, b, bias_rows, bias), (mm, addmm_rows, addmm) in zip(cases, results):
    if not torch.equal(mm.cpu(), a @ b):
        bad.append(("mm", tuple(a.shape)))
    if not torch.equal(addmm_rows.cpu(), torch.addmm(bias_rows, a, b, beta=0.5, alpha=2.0)):
        bad.append(("addmm, bias of rows", tuple(a.shape)))
    if not torch.equal(addmm.cpu(), torch.addmm(bias, a, b)):
        bad.append(("addmm", tuple(a.shape)))
print("bad", bad)
"""


def test_long_gemms_asking_again_after_their_first_rows_equal_cpu_eager_bit_for_bit():
    # Note [A long GEMM asks again after its first rows]: the first rows and
    # the rest run as two GEMMs, on different thread counts.
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(LONG_SCRIPT)], capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "bad []" in done.stdout.splitlines(), done.stdout
