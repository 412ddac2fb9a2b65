"""TorchScript (script and trace) and gradient checkpointing on npu."""

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

import torch_npu  # noqa: F401


class BERTLayer(nn.Module):
    """The seeds' BERTModel: Linear then LayerNorm."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(64, 64)
        self.norm = nn.LayerNorm(64)

    def forward(self, x):
        return self.norm(self.linear(x))


def test_script_and_trace_match_eager():
    model = BERTLayer().npu()
    x = torch.randn(4, 64).npu()
    eager = model(x)
    scripted = torch.jit.script(model)
    traced = torch.jit.trace(model, x)
    with torch.npu.stream(torch.npu.Stream()):
        out_s, out_t = scripted(x), traced(x)
    torch.npu.synchronize()
    torch.testing.assert_close(out_s.cpu(), eager.cpu())
    torch.testing.assert_close(out_t.cpu(), eager.cpu())


def test_gradient_checkpointing_matches_plain_backward():
    model = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 16)).npu()
    x = torch.randn(4, 16).npu().requires_grad_()
    checkpoint(model, x, use_reentrant=False).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    x2 = x.detach().clone().requires_grad_()
    model(x2).sum().backward()
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g.cpu(), p.grad.cpu())
    torch.testing.assert_close(x.grad.cpu(), x2.grad.cpu())


def test_compile_mode_flags():
    assert torch.npu.is_jit_compile_false()
    torch.npu.set_compile_mode(jit_compile=True)
    try:
        assert not torch.npu.is_jit_compile_false()
    finally:
        torch.npu.set_compile_mode(jit_compile=False)
    import pytest
    with pytest.raises(TypeError):
        torch.npu.set_compile_mode(jit_compile="yes")
