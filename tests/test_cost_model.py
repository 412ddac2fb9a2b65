"""The Ascend cost model (torch_npu/tools/cost_model.py): each estimate is
the roofline formula of the chip's published figures, estimate() walks a
model op by op on the meta device, and the profiler's outputs carry it."""

import csv
import json
import math

import pytest
import torch
import torch.nn as nn

import torch_npu.profiler as npu_profiler
from torch_npu.tools.cost_model import estimate, op_cost, roofline


@pytest.mark.parametrize("chip, cube_fp16, bandwidth", [("Ascend910A", 256e12, 1200e9),
                                                        ("Ascend910B2", 280e12, 1600e9),
                                                        ("Ascend310P3", 70e12, 204e9)])
def test_gemm_and_elementwise_estimates_are_the_roofline_formula(chip, cube_fp16, bandwidth):
    m = n = k = 8192  # large: compute-bound
    cost = op_cost("aten::mm", [[m, k], [k, n]], ["c10::Half", "c10::Half"], chip=chip)
    assert cost.unit == "cube" and cost.bound == "compute"
    assert math.isclose(cost.seconds, max(2 * m * n * k / cube_fp16, (m * k + k * n + m * n) * 2 / bandwidth))
    skinny = op_cost("mm", [[8, 8192], [8192, 8192]], ["float16", "float16"], chip=chip)  # a decode-like GEMV
    assert skinny.bound == "memory"
    assert math.isclose(skinny.seconds, (8 * 8192 + 8192 * 8192 + 8 * 8192) * 2 / bandwidth)
    numel = 1 << 24
    add = op_cost("aten::add", [[numel], [numel]], ["float", "float"], chip=chip)
    vector_fp32 = cube_fp16 * 128 / 4096 / 2
    assert add.unit == "vector" and add.bound == "memory"
    assert math.isclose(add.seconds, max(numel / vector_fp32, 3 * numel * 4 / bandwidth))


def test_fp32_gemms_follow_each_chips_precision_mode():
    shape = [[4096, 4096], [4096, 4096]]
    fp16 = op_cost("mm", shape, ["float16"] * 2, chip="Ascend910B2").seconds
    fp32_910b = op_cost("mm", shape, ["float32"] * 2, chip="Ascend910B2").seconds
    fp32_910a = op_cost("mm", shape, ["float32"] * 2, chip="Ascend910A").seconds
    assert math.isclose(fp32_910b, 4 * fp16)  # must_keep_origin_dtype: fp32 on the Cube at a quarter
    assert math.isclose(fp32_910a, op_cost("mm", shape, ["float16"] * 2, chip="Ascend910A").seconds)


def test_unknown_chip_is_refused():
    with pytest.raises(ValueError, match="no roofline for chip 'Ascend950'"):
        roofline("Ascend950")


def test_estimate_walks_the_model_and_its_backward():
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).half()
    x = torch.randn(64, 1024).half()
    inference = estimate(model, (x,), chip="Ascend910B2")
    training = estimate(model, (x,), chip="Ascend910B2", train=True)
    assert math.isclose(inference.seconds, sum(op["seconds"] for op in inference.ops))
    addmm = next(op for op in inference.ops if op["name"] == "addmm")
    assert addmm["count"] == 2 and addmm["flops"] == 2 * 2 * 64 * 1024 * 4096
    assert training.seconds > 2 * inference.seconds  # the backward's GEMMs
    assert {"gelu_backward", "mm"} <= {op["name"] for op in training.ops}
    assert "estimated step time on Ascend910B2" in str(training)
    assert next(iter(model.parameters())).device.type == "cpu"  # the model itself is untouched


def test_profiler_outputs_carry_the_estimate(tmp_path, monkeypatch):
    x = torch.randn(256, 256, device="npu")
    with npu_profiler.profile(activities=[npu_profiler.ProfilerActivity.CPU, npu_profiler.ProfilerActivity.NPU],
                              record_shapes=True,
                              on_trace_ready=npu_profiler.tensorboard_trace_handler(str(tmp_path))):
        (x @ x).relu()
        torch.npu.synchronize()
    (folder,) = list(tmp_path.glob("*_ascend_pt"))
    out = folder / "ASCEND_PROFILER_OUTPUT"
    with open(out / "kernel_details.csv", newline="") as f:
        mm = next(r for r in csv.DictReader(f) if r["Name"] == "mm")
    expected = op_cost("mm", [[256, 256], [256, 256]], ["float32"] * 2, chip=torch.npu.get_device_name())
    assert math.isclose(float(mm["Estimated Duration(us)"]), round(expected.seconds * 1e6, 3), abs_tol=1e-3)
    assert mm["Estimated Bound"] == expected.bound
    with open(out / "op_statistic.csv", newline="") as f:
        assert float(next(r for r in csv.DictReader(f) if r["OP Type"] == "mm")["Estimated Total Time(us)"]) > 0
    track = [e for e in json.loads((out / "trace_view.json").read_text())["traceEvents"] if e.get("cat") == "estimate"]
    assert any(e["name"] == "mm" and e["pid"].startswith("Estimated Ascend") for e in track)
