"""Nested tensors on npu (csrc/ops/nested.cpp): ATen's device-generic nested
kernels run over the npu buffer, the CPU-only ones take the CPU fallback;
every result equals cpu's."""

import pytest
import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401  (registers npu)

pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors",
                                        "ignore:CAUTION")


def pair(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(3, 4, generator=g), torch.randn(5, 4, generator=g)]


def both(parts):
    return torch.nested.nested_tensor(parts), torch.nested.nested_tensor([p.npu() for p in parts])


def padded(nt):
    return torch.nested.to_padded_tensor(nt, 0.0).cpu()


def test_unbind_gives_the_components_back_on_npu():
    parts = pair()
    _, nt = both(parts)
    assert nt.is_nested and nt.device.type == "npu"
    out = nt.unbind()
    assert [t.device.type for t in out] == ["npu", "npu"]
    for got, want in zip(out, parts):
        assert torch.equal(got.cpu(), want)
    assert torch.nested.as_nested_tensor([p.npu() for p in parts]).unbind()[1].device.type == "npu"


@pytest.mark.parametrize("fn", [lambda t: t + t, lambda t: t * 2, F.relu, F.gelu, torch.sin,
                                lambda t: F.layer_norm(t, (4,), torch.ones(4, device=t.device), torch.zeros(4, device=t.device)), lambda t: torch.softmax(t, -1),
                                lambda t: F.linear(t, torch.ones(2, 4, device=t.device)), lambda t: t.clone()],
                         ids=["add", "mul", "relu", "gelu", "sin", "layer_norm", "softmax", "linear", "clone"])
def test_generic_nested_kernels_equal_cpu(fn):
    cpu, npu = both(pair(1))
    got = fn(npu)
    assert got.is_nested and got.device.type == "npu"
    torch.testing.assert_close(padded(got), padded(fn(cpu)))


def test_cpu_only_nested_kernels_take_the_fallback_and_equal_cpu():
    cpu, npu = both(pair(2))
    torch.testing.assert_close(padded(npu), padded(cpu))  # to_padded_tensor
    other_cpu, other_npu = both([p.t().contiguous() for p in pair(3)])
    torch.testing.assert_close(padded(torch.bmm(npu, other_npu)), padded(torch.bmm(cpu, other_cpu)))


def test_an_irregular_dimension_has_no_size():
    _, nt = both(pair())
    assert nt.size(0) == 2
    with pytest.raises(RuntimeError, match="Given dimension 1 is irregular and does not have a size"):
        nt.size(1)


@pytest.mark.parametrize("fn", [F.gelu, lambda t: torch.softmax(t, -1),
                                lambda t: F.linear(t, torch.ones(2, 4, device=t.device)),
                                lambda t: F.layer_norm(t, (4,), torch.ones(4, device=t.device),
                                                       torch.zeros(4, device=t.device))],
                         ids=["gelu", "softmax", "linear", "layer_norm"])
def test_gradients_through_nested_tensors_equal_cpu(fn):
    # The backward of to_padded_tensor makes a nested tensor from the padded
    # gradient and the (host) sizes of the forward's: a nested result of a
    # kernel run on the host comes back to npu whole.
    grads = []
    for device in ("cpu", "npu"):
        x = torch.nested.nested_tensor([p.to(device) for p in pair(4)], requires_grad=True)
        y = torch.nested.to_padded_tensor(fn(x), 0.0)
        (y * torch.arange(y.size(-1), device=device)).sum().backward()
        grads.append(padded(x.grad))
    torch.testing.assert_close(grads[1], grads[0])
