"""torch.profiler with npu device activity (csrc/profiler/): every stream
task shows as a device event with real times, on its device and stream,
linked to the host op that launched it; key_averages() has device time; the
chrome trace has the kernels and their flow arrows."""

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _device_events(prof):
    return [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]


def test_kernels_are_device_events_linked_to_their_ops():
    x = torch.randn(256, 256, device="npu")
    torch.npu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        y = (x @ x).relu()
        torch.npu.synchronize()
    names = [e.name for e in _device_events(prof)]
    assert any("mm" in n for n in names) and any("relu" in n for n in names), names
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["aten::mm"].device_time_total > 0
    assert averages["aten::relu"].device_time_total > 0
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=10)
    assert "Self NPU" in table and "NPU total" in table
    del y


def test_device_times_are_real_and_on_their_stream(tmp_path):
    x = torch.randn(64, device="npu")
    side = torch.npu.Stream()
    torch.npu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        torch.npu._sleep(20000)  # 20 ms on the default stream
        with torch.npu.stream(side):
            x.add(1)
        torch.npu.synchronize()
    sleeps = [e for e in _device_events(prof) if "_sleep" in e.name]
    assert sleeps and sleeps[0].device_time_total >= 15000  # microseconds
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in trace if e.get("cat") == "kernel"]
    assert {int(k["args"]["stream"]) for k in kernels} >= {0, side.stream_id}
    flows = [e for e in trace if e.get("cat") == "ac2g"]
    assert flows, "no flow arrows from host ops to their kernels"


def test_no_device_activity_without_the_npu_activity():
    x = torch.randn(16, device="npu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        x.add(1)
        torch.npu.synchronize()
    assert not _device_events(prof)
    assert any(e.name == "aten::add" for e in prof.events())


def test_profile_memory_reports_npu_allocations():
    torch.npu.synchronize()
    with profile(activities=ACTIVITIES, profile_memory=True, record_shapes=True) as prof:
        x = torch.empty(1024, 1024, device="npu")  # 4 MiB
        y = x.add(1)
        del x, y
        torch.npu.synchronize()
    rows = {e.key: e for e in prof.key_averages()}
    assert rows["aten::empty"].device_memory_usage >= 4 * 1024 * 1024
    # The frees show too: the net of the region is about zero.
    assert abs(sum(e.self_device_memory_usage for e in prof.key_averages())) < 4 * 1024 * 1024
    assert "NPU Mem" in prof.key_averages().table(sort_by="self_device_memory_usage", row_limit=5)
