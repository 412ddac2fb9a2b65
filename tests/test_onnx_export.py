"""torch_npu.onnx: exporting models that call torch_npu's fused operators.

Differential where it can be: an exported model run in ONNX Runtime on the
host gives what the model gives on npu. onnx, onnxscript and onnxruntime are
installed, pinned, by scripts/setup_clients.sh (tests/clients/requirements.txt).
"""

import importlib

import pytest
import torch
import torch.nn.functional as F

import onnx
import onnxruntime

import torch_npu

COMBINED_OPS = ("npu_linear", "npu_transpose", "npu_broadcast", "npu_conv_transpose2d", "npu_conv2d", "npu_conv3d",
                "npu_stride_copy", "npu_sort_v2", "npu_layer_norm_eval", "npu_reshape", "npu_pad", "npu_convolution",
                "npu_convolution_transpose", "npu_confusion_transpose", "npu_max", "npu_bmmV2", "npu_dtype_cast",
                "npu_silu", "npu_min", "npu_fused_attention_layernorm_qkv_fwd")


@pytest.fixture(scope="module", autouse=True)
def onnx_installed():
    """`import torch_npu.onnx` replaces torch_npu's combined operators for the
    process, as real torch_npu's does; other test files sharing this worker
    expect the operators themselves, so they are put back afterwards."""
    before = {name: getattr(torch_npu, name) for name in COMBINED_OPS}
    combined = importlib.import_module("torch_npu.onnx.wrapper_ops_combined")
    assert tuple(combined.COMBINED_OPS) == COMBINED_OPS
    yield
    for name, op in before.items():
        setattr(torch_npu, name, op)


def export(model, args, path, dynamo):
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, args, str(path), opset_version=11 if not dynamo else 18, dynamo=dynamo,
                          input_names=[f"in{i}" for i in range(len(args))])
    return onnx.load(str(path))


def run_onnx(path, args):
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {f"in{i}": a.cpu().numpy() for i, a in enumerate(args)})


class Combined(torch.nn.Module):
    """Calls most of the operators that export as their standard composition."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(6, 8))
        self.bias = torch.nn.Parameter(torch.randn(6))
        self.conv = torch.nn.Parameter(torch.randn(2, 1, 3, 3))

    def forward(self, x, image):
        h = torch_npu.npu_linear(x, self.weight, self.bias)              # (4, 6)
        h = torch_npu.npu_silu(h)
        h = torch_npu.npu_transpose(h, (1, 0), True)                      # (6, 4)
        h = torch_npu.npu_pad(h, [0, 1, 1, 0])                            # (7, 5)
        h = torch_npu.npu_reshape(h, (5, 7))
        values, _ = torch_npu.npu_max(h, 1, True)                        # (5, 1)
        wide = torch_npu.npu_broadcast(values, (5, 3))
        mm = torch_npu.npu_bmmV2(wide.unsqueeze(0), torch_npu.npu_transpose(wide, (1, 0), True).unsqueeze(0), [])
        conv = torch_npu.npu_conv2d(image, self.conv, None, [1, 1], [1, 1], [1, 1], 1)
        return mm, torch_npu.npu_dtype_cast(conv, torch.float16).float()


@pytest.mark.parametrize("dynamo", [True, False], ids=["dynamo", "torchscript"])
def test_combined_ops_export_as_standard_onnx_that_computes_what_npu_does(tmp_path, dynamo):
    torch.manual_seed(0)
    model = Combined().npu()
    args = (torch.randn(4, 8).npu(), torch.randn(1, 1, 5, 5).npu())
    proto = export(model, args, tmp_path / "combined.onnx", dynamo)
    assert {node.domain for node in proto.graph.node} <= {"", "ai.onnx"}  # standard operators only
    with torch.no_grad():
        expected = [t.cpu() for t in model(*args)]
    for got, want in zip(run_onnx(tmp_path / "combined.onnx", args), expected):
        torch.testing.assert_close(torch.from_numpy(got), want, rtol=1e-3, atol=1e-3)


def test_the_torchscript_exporter_writes_ascend_custom_nodes(tmp_path):
    class Fused(torch.nn.Module):
        def forward(self, x, rois, labels):
            normed, rstd = torch_npu.npu_rms_norm(x, torch.ones(8, device=x.device), epsilon=1e-3)
            pooled = torch_npu.npu_roi_align(x.reshape(1, 1, 4, 8), rois, 0.25, 3, 3, 2, 0)
            hot = torch_npu.npu_one_hot(labels, depth=5)
            return normed, rstd, pooled, hot, torch_npu.npu_gelu(x, approximate="tanh")

    args = (torch.randn(4, 8).npu(), torch.tensor([[0, -2.0, -2.0, 22.0, 22.0]]).npu(),
            torch.tensor([4, 3, 2, 1], dtype=torch.int32).npu())
    nodes = {node.op_type: node for node in export(Fused(), args, tmp_path / "fused.onnx", False).graph.node
             if node.domain == "npu"}
    assert set(nodes) == {"NPURmsNorm", "NPURoiAlign", "NPUOneHot", "NPUGeluV2"}

    def attributes(node):
        return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    rms = nodes["NPURmsNorm"]
    assert len(rms.input) == 2 and len(rms.output) == 2  # (x, gamma) -> (y, rstd)
    assert attributes(rms)["epsilon"] == pytest.approx(1e-3)
    assert attributes(nodes["NPURoiAlign"]) == pytest.approx(
        {"spatial_scale": 0.25, "pooled_height": 3, "pooled_width": 3, "sample_num": 2, "roi_end_mode": 0})
    assert attributes(nodes["NPUOneHot"]) == {"num_classes": -1, "depth": 5, "on_value": 1, "off_value": 0}
    assert attributes(nodes["NPUGeluV2"]) == {"approximate": b"tanh"}


def test_an_attribute_that_is_not_a_constant_is_refused_by_name(tmp_path):
    class Hot(torch.nn.Module):
        def forward(self, x, n):
            return torch.ops.npu.npu_one_hot(x, depth=int(n.sum()))  # scripted: depth is computed

    args = (torch.tensor([1, 0], dtype=torch.int32).npu(), torch.tensor(3).npu())
    with pytest.raises(Exception, match="depth.*npu::NPUOneHot"):
        export(torch.jit.script(Hot()), args, tmp_path / "hot.onnx", False)


def test_the_operators_keep_their_behaviour_outside_an_export():
    for name in COMBINED_OPS:
        assert getattr(torch_npu, name).__wrapped__ is getattr(torch.ops.npu, name)
    assert torch_npu.npu_max.dim is torch.ops.npu.npu_max.dim  # the operator's attributes
    y = torch.randn(4, 8).npu()
    compiled = torch.compile(lambda t: torch_npu.npu_silu(torch_npu.npu_transpose(t, (1, 0), True)), fullgraph=True)
    assert torch.equal(compiled(y).cpu(), F.silu(y.t()).cpu())
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(6, 8, requires_grad=True)
    xn, wn = (t.detach().npu().requires_grad_() for t in (x, w))
    torch_npu.npu_linear(xn, wn).sum().backward()
    F.linear(x, w).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad)
    torch.testing.assert_close(wn.grad.cpu(), w.grad)
    # The custom-node operators stay the operators themselves: autograd through them works.
    assert torch_npu.npu_rms_norm is torch.ops.npu.npu_rms_norm
    gamma = torch.ones(8).npu().requires_grad_()
    torch_npu.npu_rms_norm(xn, gamma)[0].sum().backward()
    assert gamma.grad is not None
    # Bad arguments get the operator's own error.
    with pytest.raises(RuntimeError, match="npu_pad"):
        torch_npu.npu_pad(xn, [1])
