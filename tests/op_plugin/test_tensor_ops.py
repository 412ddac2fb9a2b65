"""torch_npu.op_plugin.tensor_ops: slicing, indexing, casts, layout, scatter, packing and the
other tensor operators, each on npu against a plain-PyTorch formula on cpu, with the
argument checks."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import npu, rnd


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.uint8, torch.int64])
def test_slice_and_indexing(dtype):
    x = torch.arange(60).reshape(3, 4, 5).to(dtype)
    got = torch_npu.npu_slice(npu(x), [1, 0, 2], [2, 3, 3])
    assert_close(got.cpu(), x[1:3, 0:3, 2:5])
    got = torch_npu.npu_indexing(npu(x), [0, 1, 0], [3, 4, 5], [2, 1, 2])
    assert_close(got.cpu(), x[0:3:2, 1:4, 0:5:2])
    # begin_mask / end_mask ignore the bounds, shrink_axis_mask selects one element.
    got = torch_npu.npu_indexing(npu(x), [2, 1, 7], [0, 3, 9], [1, 1, 1], begin_mask=0b100, end_mask=0b101,
                                 shrink_axis_mask=0b001)
    assert_close(got.cpu(), x[2, 1:3, :])


def test_slice_result_is_not_a_view():
    x = npu(torch.arange(6.0).reshape(2, 3))
    y = torch_npu.npu_slice(x, [0, 0], [2, 3])
    y.add_(1)
    assert_close(x.cpu(), torch.arange(6.0).reshape(2, 3))


def test_slice_and_indexing_bad_input():
    x = npu(torch.zeros(2, 3))
    with pytest.raises(RuntimeError, match="out of range for dimension 1"):
        torch_npu.npu_slice(x, [0, 2], [2, 2])
    with pytest.raises(RuntimeError, match="offsets has 1 entries"):
        torch_npu.npu_slice(x, [0], [2, 2])
    with pytest.raises(RuntimeError, match="ellipsis_mask and new_axis_mask are not supported on vNPU"):
        torch_npu.npu_indexing(x, [0, 0], [2, 3], [1, 1], ellipsis_mask=1)


def test_dtype_cast_and_its_gradient():
    x = rnd(3, 3).requires_grad_()
    xn = npu(x.detach()).requires_grad_()
    y = torch_npu.npu_dtype_cast(xn, torch.half)
    assert y.dtype == torch.half and "NpuDtypeCastBackward" in str(y.grad_fn)
    assert_close(y.cpu(), x.detach().half())
    (g,) = torch.autograd.grad(y, xn, torch.ones_like(y))
    assert g.grad_fn is None and g.dtype == torch.float32
    assert torch_npu._npu_dtype_cast(xn, torch.bfloat16).dtype == torch.bfloat16
    out = npu(torch.zeros(3, 3, dtype=torch.half))
    assert torch_npu.npu_dtype_cast_(out, xn.detach()) is out
    assert_close(out.cpu(), x.detach().half())


def test_dtype_cast_gradient_taken_with_create_graph_has_a_graph():
    # op-plugin's backward marks the incoming gradient as requiring grad, so
    # create_graph=True records the cast back (real test_npu_dtype_cast_double_backward)
    xn = npu(rnd(3, 3)).requires_grad_()
    y = torch_npu.npu_dtype_cast(xn, torch.half)
    (g,) = torch.autograd.grad(y, xn, torch.ones_like(y), create_graph=True)
    assert g.grad_fn is not None and g.dtype == torch.float32
    assert_close(g.cpu(), torch.ones(3, 3))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                                   torch.float64, torch.bool, torch.bfloat16, torch.float8_e5m2,
                                   torch.float8_e4m3fn, torch.complex64, torch.uint16])
def test_dtype_cast_takes_every_torch_dtype_as_its_int_argument(dtype):
    # op-plugin's schema: npu_dtype_cast(Tensor self, int dtype, int? input_dtype=None)
    x = rnd(4, 5) * 4
    out = torch_npu.npu_dtype_cast(npu(x), dtype)
    assert out.dtype == dtype and torch.equal(out.cpu(), x.to(dtype))


def test_dtype_cast_to_and_from_torch_npu_constants():
    x = torch.tensor([1.0, 0.3, -2.5, 40000.0, 0.0])
    assert torch_npu.npu_dtype_cast(npu(x), torch_npu.bfloat16).dtype == torch.bfloat16
    codes = torch_npu.npu_dtype_cast(npu(x), torch_npu.hifloat8)  # bytes in a uint8 tensor, as on the chip
    assert codes.dtype == torch.uint8 and torch.equal(codes.cpu(), torch_npu._hifloat8.encode(x))
    back = torch_npu.npu_dtype_cast(codes, torch.float32, input_dtype=torch_npu.hifloat8)
    assert_close(back.cpu(), torch_npu._hifloat8.decode(codes.cpu()))
    assert back[3].item() == 32768.0  # HiFloat8 saturates at its largest finite value


def test_dtype_cast_bad_input():
    x = npu(rnd(2, 4))
    with pytest.raises(RuntimeError, match="dtype=torch_npu.int4 is not supported on vNPU"):
        torch_npu.npu_dtype_cast(x, torch_npu.int4)
    with pytest.raises(RuntimeError, match="dtype=5000 is neither a torch dtype nor a torch_npu dtype constant"):
        torch_npu.npu_dtype_cast(x, 5000)
    with pytest.raises(RuntimeError, match="reads HiFloat8 codes from uint8 / int8 bytes, got torch.float32"):
        torch_npu.npu_dtype_cast(x, torch.half, input_dtype=torch_npu.hifloat8)
    with pytest.raises(RuntimeError, match="does not match the input's dtype"):
        torch_npu.npu_dtype_cast(x, torch.half, input_dtype=torch_npu.int32)


def test_broadcast_transpose_reshape():
    x = torch.tensor([[1], [2], [3]])
    assert_close(torch_npu.npu_broadcast(npu(x), [3, 3]).cpu(), x.expand(3, 3))
    y = rnd(5, 3, 6, 4, seed=1)
    got = torch_npu.npu_transpose(npu(y), [0, 3, 2, 1])
    assert got.is_contiguous()
    assert_close(got.cpu(), y.permute(0, 3, 2, 1))
    assert_close(torch_npu.npu_reshape(npu(y), [15, 24]).cpu(), y.reshape(15, 24))
    assert_close(torch_npu.npu_transpose(npu(y), [-1, -4, 2, 1]).cpu(), y.permute(3, 0, 2, 1))
    for bad in ([0, 1, 1, 2], [0, 1, 3, -1], [0, 1, 2, 4]):
        with pytest.raises(RuntimeError, match="is not a permutation"):
            torch_npu.npu_transpose(npu(y), bad)


def test_stride_add_and_stride_copy():
    x1, x2 = rnd(2, 3, 2, 2, 16, seed=1), rnd(2, 2, 2, 2, 16, seed=2)
    got = torch_npu.npu_stride_add(npu(x1), npu(x2), 1, 0, 3)
    want = torch.zeros(2, 48, 2, 2, 16)
    want[:, :2] += x1[:, 1:]
    want[:, :2] += x2
    assert_close(got.cpu(), want)
    x = rnd(13, 23, seed=3)
    got = torch_npu.npu_stride_copy(npu(x), [10, 15], [1, 2], 1)
    assert_close(got.cpu(), x.reshape(-1).as_strided([10, 15], [1, 2], 1))


def test_sort_v2():
    x = rnd(3, 50, seed=4)
    assert_close(torch_npu.npu_sort_v2(npu(x), dim=-1, descending=True).cpu(), x.sort(-1, descending=True).values)
    assert_close(torch_npu.npu_sort_v2(npu(x), 0).cpu(), x.sort(0).values)


@pytest.mark.parametrize("depth", [3, 10])
def test_one_hot(depth):
    x = torch.randint(0, 5, (2, 3), generator=torch.Generator().manual_seed(0))
    got = torch_npu.npu_one_hot(npu(x), -1, depth, 2.5, -1)
    hot = F.one_hot(x, 10)[..., :depth].float()
    assert got.dtype == torch.float32
    assert_close(got.cpu(), hot * 2.5 + (1 - hot) * -1)


def test_scatter_writes_along_dim():
    x = torch.tensor([[1.6279, 0.1226], [0.9041, 1.0980]])
    got = torch_npu.npu_scatter(npu(x), npu(torch.tensor([0, 1], dtype=torch.int32)),
                                npu(torch.tensor([-1.1993, -1.5247])), 0)
    assert_close(got.cpu(), torch.tensor([[-1.1993, 0.1226], [0.9041, -1.5247]]))
    y = rnd(3, 4, 5, seed=5)
    idx = torch.randint(0, 5, (3, 4), generator=torch.Generator().manual_seed(1))
    upd = rnd(3, 4, seed=6)
    want = y.clone()
    for i in range(3):
        for j in range(4):
            want[i, j, idx[i, j]] = upd[i, j]
    assert_close(torch_npu.npu_scatter(npu(y), npu(idx), npu(upd), 2).cpu(), want)
    with pytest.raises(RuntimeError, match="the input without dimension 0"):
        torch_npu.npu_scatter(npu(y), npu(idx), npu(upd), 0)


@pytest.mark.parametrize("start,length", [(0, 1), (4, 8), (0, 16)])
def test_scatter_update(start, length):
    var = rnd(4, 8, 16, 64, seed=7)
    upd = rnd(4, 8, length, 64, seed=8)
    idx = torch.full((4,), start)
    want = var.clone()
    want[:, :, start:start + length] = upd
    vn = npu(var)
    assert_close(torch_npu.scatter_update(vn, npu(idx), npu(upd), -2).cpu(), want)
    assert_close(vn.cpu(), var)  # the out-of-place form leaves its input alone
    assert torch_npu.scatter_update_(vn, npu(idx), npu(upd), -2) is vn
    assert_close(vn.cpu(), want)


def test_one_and_pad():
    x = npu(rnd(2, 3))
    assert torch_npu.one_(x) is x and bool((x.cpu() == 1).all())
    y = rnd(2, 3, seed=9)
    assert_close(torch_npu.npu_pad(npu(y), [1, 2, 3, 4]).cpu(), F.pad(y, (3, 4, 1, 2)))
    with pytest.raises(RuntimeError, match="paddings should hold"):
        torch_npu.npu_pad(npu(y), [1, 2, 3])


def test_pad_has_no_backward_as_in_torch_npu():
    # Autograd's fallback decides, as for any kernel without a derivative:
    # "warn" (torch's default) warns at backward and gives no gradient,
    # "nothing" leaves the output not requiring grad.
    import warnings
    x = npu(rnd(2, 3)).requires_grad_()
    previous = torch._C._get_autograd_fallback_mode()
    try:
        torch._C._set_autograd_fallback_mode("nothing")
        with pytest.raises(RuntimeError, match="does not require grad"):
            torch_npu.npu_pad(x, [1, 1, 1, 1]).sum().backward()
        torch._C._set_autograd_fallback_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch_npu.npu_pad(x, [1, 1, 1, 1]).sum().backward()
        assert any("autograd kernel was not registered" in str(w.message) for w in caught)
        assert x.grad is None
    finally:
        torch._C._set_autograd_fallback_mode(previous)
    # Compiled, it is one node whose meta comes from the composition.
    compiled = torch.compile(lambda t: torch_npu.npu_pad(t, [1, 1, 0, 0]) * 2)
    assert_close(compiled(npu(torch.ones(2, 2))).cpu(), F.pad(torch.ones(2, 2), (0, 0, 1, 1)) * 2)


def test_sign_bits_pack_unpack_round_trip():
    a = torch.tensor([5, 4, 3, 2, 0, -1, -2, 4, 3, 2, 1, 0, -1, -2], dtype=torch.float32)
    packed = torch_npu.npu_sign_bits_pack(npu(a), 2)
    assert packed.dtype == torch.uint8 and packed.cpu().tolist() == [[159], [15]]
    data = torch.randint(0, 256, (24,), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
    for dtype in (torch.float16, torch.float32):
        got = torch_npu.npu_sign_bits_unpack(npu(data), 4, dtype)
        mask = 2 ** torch.arange(8, dtype=torch.uint8)
        want = ((data.unsqueeze(-1) & mask).ne(0).reshape(-1).to(dtype) - 0.5) * 2
        assert_close(got.cpu(), want.reshape(4, -1))
    signs = torch_npu.npu_sign_bits_unpack(torch_npu.npu_sign_bits_pack(npu(a[:8]), 1), 1, torch.float32)
    assert_close(signs.cpu().reshape(-1), torch.where(a[:8] >= 0, 1.0, -1.0))


@pytest.mark.parametrize("op,ref", [(torch_npu.npu_max, torch.max), (torch_npu.npu_min, torch.min)])
def test_max_min_dim_and_names(op, ref):
    x = rnd(2, 3, 4, 5, seed=10)
    for dim, keep in ((2, False), (3, True)):
        values, indices = op(npu(x), dim, keep)
        want = ref(x, dim, keep)
        assert indices.dtype == torch.int32
        assert_close(values.cpu(), want.values)
        assert_close(indices.cpu(), want.indices.int())
    named = npu(x)
    named.names = ("N", "C", "H", "W")
    values, indices = op(named, "H")
    assert_close(values.cpu(), ref(x, 2).values)
    xg, xr = npu(x).requires_grad_(), x.clone().requires_grad_()
    op(xg, 1)[0].sum().backward()
    ref(xr, 1).values.sum().backward()
    assert_close(xg.grad.cpu(), xr.grad)


def test_random_choice_with_mask():
    x = torch.zeros(4, 6, dtype=torch.bool)
    x[0, 1] = x[2, 3] = x[3, 5] = True
    coords, mask = torch_npu.npu_random_choice_with_mask(npu(x), 5, 7, 9)
    assert coords.dtype == torch.int32 and coords.shape == (5, 2) and mask.shape == (5,)
    assert mask.cpu().tolist() == [True, True, True, False, False]
    picked = {tuple(c) for c in coords.cpu()[:3].tolist()}
    assert picked == {(0, 1), (2, 3), (3, 5)}
    again, _ = torch_npu.npu_random_choice_with_mask(npu(x), 5, 7, 9)
    assert_close(again.cpu(), coords.cpu())  # fixed seeds: the same draw
    with pytest.raises(RuntimeError, match="should be bool"):
        torch_npu.npu_random_choice_with_mask(npu(x.float()))


def test_anti_quant_int8_and_packed_int4():
    x = torch.randint(-127, 128, (10, 100), dtype=torch.int8, generator=torch.Generator().manual_seed(0))
    scale, offset = rnd(100, seed=35), rnd(100, seed=36)
    for dtype in (torch.float16, torch.bfloat16):
        got = torch_npu.npu_anti_quant(npu(x), npu(scale), offset=npu(offset), dst_dtype=dtype)
        assert got.dtype == dtype
        assert_close(got.cpu(), ((x.float() + offset) * scale).to(dtype))
    packed = torch.tensor([[0x76543210, -0x789ABCE0]], dtype=torch.int32)  # nibbles 0..7, then 0, 2, 3, ..., 8
    got = torch_npu.npu_anti_quant(npu(packed), npu(torch.ones(16)))
    nibbles = [(int(v) >> (4 * i)) & 0xF for v in packed[0].tolist() for i in range(8)]
    want = torch.tensor([n - 16 if n >= 8 else n for n in nibbles], dtype=torch.float16).reshape(1, 16)
    assert_close(got.cpu(), want)
    with pytest.raises(RuntimeError, match="should be int8 or int32"):
        torch_npu.npu_anti_quant(npu(x.float()), npu(scale))


@pytest.mark.parametrize("size,fmt", [((2, 32, 4, 4), 3), ((2, 32, 4, 4), 0), ((5, 6), 2), ((64, 32), 29)])
def test_empty_with_format_is_npu_format_cast_of_an_empty_tensor(size, fmt):
    t = torch_npu.empty_with_format(size, dtype=torch.float16, acl_format=fmt)
    reference = torch_npu.npu_format_cast(torch.empty(size, dtype=torch.float16, device="npu"), fmt)
    assert t.device == torch.device("npu", torch.npu.current_device())
    assert (t.shape, t.dtype, torch_npu.get_npu_format(t)) == (reference.shape, reference.dtype,
                                                               torch_npu.get_npu_format(reference))
    u = torch.ops.npu.unsafe_empty_with_format(size, dtype=torch.float16, acl_format=fmt, keep_format=True)
    assert (u.shape, torch_npu.get_npu_format(u)) == (t.shape, fmt)


def test_empty_with_format_bad_input():
    with pytest.raises(RuntimeError, match="device should be an npu device"):
        torch_npu.empty_with_format([2], device="cpu")
    with pytest.raises((RuntimeError, ValueError), match="acl_format 999"):
        torch_npu.empty_with_format([2], acl_format=999)
    with pytest.raises(RuntimeError, match="base_addr_aligned_kb=2 is not supported on vNPU"):
        torch_npu.empty_with_format([2], base_addr_aligned_kb=2)
    assert torch_npu.empty_with_format([8], base_addr_aligned_kb=0).numel() == 8
