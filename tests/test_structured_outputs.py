"""The outputs of binary TensorIterator ops on npu: shape, dtype, strides and
values as cpu gives them, on the path that skips the meta function (operands
of one dtype, shape and dense layout: Note [Operands of one dense layout],
csrc/codegen/gen_structured_kernels.py) and on the one that runs it."""

import pytest
import torch

import torch_npu  # noqa: F401

OPS = {
    "add": lambda a, b: torch.add(a, b),
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2),
    "add_float_alpha": lambda a, b: torch.add(a, b, alpha=0.5),
    "sub": lambda a, b: torch.sub(a, b),
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=3),
    "mul": lambda a, b: torch.mul(a, b),
    "operator": lambda a, b: a * b - a + b,
}
DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.bool, torch.complex64]


def _make(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 4
    if dtype == torch.bool:
        return x > 0
    if dtype == torch.complex64:
        return torch.complex(x, x.flip(-1) if x.dim() else x)
    return x.to(dtype)


def _same_as_cpu(fn, a, b):
    try:
        want = fn(a, b)
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as got:
            fn(a.npu(), b.npu())
        assert str(got.value).splitlines()[0] == str(e).splitlines()[0]
        return
    got = fn(a.npu(), b.npu())
    assert got.device.type == "npu"
    assert got.dtype == want.dtype and got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", [(1024,), (3, 1, 5), (), (0, 4)], ids=str)
def test_operands_of_one_layout_match_cpu(op, dtype, shape):
    _same_as_cpu(OPS[op], _make(shape, dtype, 0), _make(shape, dtype, 1))


LAYOUTS = {
    "channels_last": lambda a, b: (a.contiguous(memory_format=torch.channels_last),
                                   b.contiguous(memory_format=torch.channels_last)),
    "one_transposed": lambda a, b: (a, b.transpose(2, 3).contiguous().transpose(2, 3)),
    "both_transposed": lambda a, b: (a.transpose(0, 3), b.transpose(0, 3)),
    "broadcast": lambda a, b: (a, b[:, :1]),
    "mixed_dtype": lambda a, b: (a, b.to(torch.float64)),
    "int_and_float": lambda a, b: (a.to(torch.int32), b),
    "sliced": lambda a, b: (a[..., ::2], b[..., ::2]),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", OPS)
def test_other_layouts_take_the_iterator_like_cpu(op, layout):
    # Moved to npu with their strides: .npu() keeps a tensor's layout.
    a, b = LAYOUTS[layout](_make((2, 3, 4, 6), torch.float32, 2), _make((2, 3, 4, 6), torch.float32, 3))
    want = OPS[op](a, b)
    got = OPS[op](a.npu(), b.npu())
    assert got.dtype == want.dtype and got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got.cpu(), want)


def test_a_cpu_scalar_operand_and_autograd():
    a = torch.randn(5, requires_grad=True)
    an = a.detach().npu().requires_grad_()
    (an * an + torch.tensor(2.0)).sum().backward()
    (a * a + torch.tensor(2.0)).sum().backward()
    torch.testing.assert_close(an.grad.cpu(), a.grad)
