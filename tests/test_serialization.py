"""torch.save / torch.load of npu tensors, modules and optimizer state."""

import io
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

import torch_npu  # noqa: F401


@pytest.fixture()
def checkpoint():
    torch.manual_seed(0)
    model = nn.Linear(4, 3).npu()
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 4).npu()).sum().backward()
    opt.step()
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "t": torch.arange(5).npu(1)}, buf)
    return buf, model


@pytest.mark.parametrize("location,expect", [
    (None, ("npu:0", "npu:1")), ("cpu", ("cpu", "cpu")), ("npu", ("npu:0", "npu:0")),
    ("npu:1", ("npu:1", "npu:1")), (torch.device("npu:2"), ("npu:2", "npu:2")),
    ({"npu:0": "npu:3", "npu:1": "cpu"}, ("npu:3", "cpu")),
])
def test_map_location(checkpoint, location, expect):
    buf, model = checkpoint
    buf.seek(0)
    loaded = torch.load(buf, map_location=location)
    assert str(loaded["model"]["weight"].device) == expect[0]
    assert str(loaded["t"].device) == expect[1]
    assert torch.equal(loaded["model"]["weight"].cpu(), model.weight.detach().cpu())
    assert torch.equal(loaded["t"].cpu(), torch.arange(5))
    assert str(loaded["opt"]["state"][0]["exp_avg"].device) == expect[0]


def test_load_onto_missing_device_raises(checkpoint):
    buf, _ = checkpoint
    buf.seek(0)
    with pytest.raises(RuntimeError, match="device_count"):
        torch.load(buf, map_location="npu:9")


def test_checkpoint_loads_without_torch_npu(checkpoint, tmp_path):
    buf, model = checkpoint
    path = tmp_path / "ckpt.pt"
    path.write_bytes(buf.getvalue())
    code = ("import torch, sys; d = torch.load(sys.argv[1], map_location='cpu'); "
            "print(d['model']['weight'].device, 'torch_npu' in sys.modules)")
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    out = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["cpu", "False"]


def test_module_round_trip(tmp_path):
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU()).npu()
    path = tmp_path / "m.pt"
    torch.save(model, path)
    loaded = torch.load(path, weights_only=False)
    x = torch.randn(2, 3).npu()
    assert next(loaded.parameters()).device.type == "npu"
    assert torch.equal(loaded(x).cpu(), model(x).cpu())


def test_format_tag_survives_round_trip():
    x = torch.randn(2, 3, 4, 5).npu()
    assert torch_npu.get_npu_format(x) == 0          # 4-d base format NCHW
    assert torch_npu.get_npu_format(x.view(-1)) == 2  # ND
    y = torch_npu.npu_format_cast(x, 29)              # FRACTAL_NZ
    assert torch_npu.get_npu_format(y) == 29
    assert torch.equal(y.cpu(), x.cpu())              # values unchanged
    buf = io.BytesIO()
    torch.save({"y": y}, buf)
    buf.seek(0)
    loaded = torch.load(buf)["y"]
    assert loaded.device.type == "npu" and torch_npu.get_npu_format(loaded) == 29
    torch_npu.npu_format_cast_(loaded, 2)
    assert torch_npu.get_npu_format(loaded) == 2


def test_format_cast_to_its_own_or_another_base_format_shares_memory():
    # as torch_npu, which returns the tensor itself: extensions keep the data
    # pointer of npu_format_cast(t, ND) (MindSpeed's ATB adapter does)
    x = torch.randn(4, 6).npu()
    same = torch_npu.npu_format_cast(x, 2)             # ND -> ND
    assert same.data_ptr() == x.data_ptr() and torch_npu.get_npu_format(same) == 2
    image = torch.randn(2, 3, 4, 5).npu()
    nhwc = torch_npu.npu_format_cast(image, 1)         # NCHW -> NHWC, both base formats
    assert nhwc.data_ptr() == image.data_ptr() and torch_npu.get_npu_format(nhwc) == 1
    assert torch_npu.get_npu_format(image) == 0        # the input keeps its tag
    nz = torch_npu.npu_format_cast(x, 29)              # ND -> FRACTAL_NZ moves data: a new tensor
    assert nz.data_ptr() != x.data_ptr()
    same.add_(1)                                       # the alias writes through
    torch.testing.assert_close(x.cpu(), nz.cpu() + 1)


def test_format_cast_takes_op_plugins_overloads_and_keywords():
    x = torch.randn(8, 16).half().npu()
    nz = torch_npu.npu_format_cast(x, 29, customize_dtype=1, input_dtype=1)  # layout hints: values unchanged
    assert torch_npu.get_npu_format(nz) == 29 and torch.equal(nz.cpu(), x.cpu())
    like = torch_npu.npu_format_cast(torch.ones(8, 16).half().npu(), nz)  # the Tensor overload: dst's format
    assert torch_npu.get_npu_format(like) == 29 and bool((like.cpu() == 1).all())
    y = torch.randn(3, 4).npu()
    assert torch_npu.npu_format_cast_(y, nz) is y and torch_npu.get_npu_format(y) == 29  # src's format, in place
    torch_npu.npu_format_cast_(y, 2)  # the .acl_format overload
    assert torch_npu.get_npu_format(y) == 2
    with pytest.raises(RuntimeError):
        torch_npu.npu_format_cast(x, 29, 1)  # the dtypes are keyword-only, as in op-plugin


def _nz_bytes(shape, c0, element_size):
    # FRACTAL_NZ tiles the last two dims as (ceil(n / C0), ceil(m / 16), 16, C0)
    *batch, m, n = shape
    tiles = -(-n // c0) * -(-m // 16) * 16 * c0
    for b in batch:
        tiles *= b
    return tiles * element_size


@pytest.mark.parametrize("shape,dtype,customize_dtype,c0", [
    ((15, 17), torch.half, None, 16),
    ((16, 32), torch.float, None, 16),     # float32 takes float16's C0
    ((15, 33), torch.int8, None, 32),      # 1-byte types: 32
    ((3, 15, 33), torch.int8, None, 32),   # batch dims kept
    ((4, 15, 17), torch.int32, 3, 8),      # customize_dtype=ACL_INT32: 32 bytes / 4
    ((15, 17), torch.int32, torch_npu.int32, 8),  # or torch_npu's dtype constant
])
def test_a_cast_to_nz_pads_the_storage_as_the_chip_does(shape, dtype, customize_dtype, c0):
    x = (torch.rand(shape) * 100).to(dtype).npu()
    nz = torch_npu.npu_format_cast(x, 29, customize_dtype=customize_dtype)
    assert nz.untyped_storage().size() == _nz_bytes(shape, c0, x.element_size())
    assert torch_npu.get_storage_size(nz) * nz.element_size() == nz.untyped_storage().size()
    assert nz.is_contiguous() and not nz._is_view() and torch.equal(nz.cpu(), x.cpu())
    padding = torch.empty(0, dtype=dtype).set_(nz.untyped_storage().cpu())[x.numel():]
    assert not padding.any()  # zeros, as the chip pads: nothing stale reaches a checkpoint
    back = torch_npu.npu_format_cast(nz, 2)  # and back to ND: the tensor's own size again
    assert back.untyped_storage().size() == x.untyped_storage().size() and torch.equal(back.cpu(), x.cpu())
    torch.testing.assert_close((nz * 2).cpu(), x.cpu() * 2)


def test_a_cast_to_nc1hwc0_pads_the_channels():
    x = torch.randn(2, 3, 4, 5).npu()
    out = torch_npu.npu_format_cast(x, 3)
    assert out.untyped_storage().size() == 2 * 1 * 4 * 5 * 16 * 4  # C1 = ceil(3 / 16), C0 = 16
    assert torch.equal(out.cpu(), x.cpu())


def test_format_cast_rejects_an_unknown_customize_dtype():
    with pytest.raises(RuntimeError, match="customize_dtype 99 is not a data type"):
        torch_npu.npu_format_cast(torch.randn(4, 4).npu(), 29, customize_dtype=99)


@pytest.mark.parametrize("acl_format", [2, 29])
def test_format_cast_passes_the_gradient_through(acl_format, recwarn):
    # op-plugin's derivative of every npu_format_cast overload is `self: grad`
    x = torch.randn(4, 5).npu().requires_grad_()
    y = torch_npu.npu_format_cast(x, acl_format)
    assert y.grad_fn is not None
    (y * torch.arange(5.0).npu()).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.arange(5.0).expand(4, 5))
    like = torch_npu.npu_format_cast(x, y)  # the Tensor overload too
    assert like.grad_fn is not None
    assert not [w for w in recwarn if "autograd kernel was not registered" in str(w.message)]


def test_a_deepcopy_keeps_the_format_and_owns_its_memory():
    import copy
    x = torch_npu.npu_format_cast(torch.rand(3, 3).npu(), 29)
    y = copy.deepcopy(x)
    assert torch_npu.get_npu_format(y) == 29 and torch.equal(x.cpu(), y.cpu())
    assert y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    plain = copy.deepcopy(torch.rand(2, 3, 4, 5).npu())
    assert torch_npu.get_npu_format(plain) == 0  # untagged tensors keep their base format


def test_the_format_enum_prints_by_name_pickles_and_counts_as_its_number():
    import pickle
    from enum import IntEnum
    fmt = torch_npu.Format
    assert issubclass(fmt, IntEnum) and fmt.__module__ == "torch_npu.npu._format" and fmt.__name__ == "Format"
    assert (fmt.UNDEFINED, fmt.NCHW, fmt.ND, fmt.FRACTAL_NZ, fmt.FRACTAL_NZ_C0_8) == (-1, 0, 2, 29, 54)
    assert str(fmt.FRACTAL_NZ) == f"{fmt.FRACTAL_NZ}" == "FRACTAL_NZ" and repr(fmt.ND) == "<Format.ND: 2>"
    assert fmt(29) is fmt.FRACTAL_NZ and fmt["NC1HWC0"] == 3 and len(fmt) == 20
    assert pickle.loads(pickle.dumps(fmt.FRACTAL_Z)) is fmt.FRACTAL_Z
    got = torch_npu.get_npu_format(torch_npu.npu_format_cast(torch.rand(2, 2).npu(), 29))
    assert got is fmt.FRACTAL_NZ


def test_a_view_has_the_format_of_the_tensor_it_views():
    # on the chip the format belongs to the storage, which views share
    nz = torch_npu.npu_format_cast(torch.rand(4, 2).npu(), 29)
    assert [torch_npu.get_npu_format(v) for v in (nz[2:], nz.view(-1), nz.t(), nz[1:][1:])] == [29] * 4
    plain = torch.rand(2, 3, 4, 5).npu()
    assert torch_npu.get_npu_format(plain) == 0 and torch_npu.get_npu_format(plain[0]) == 2  # untagged: by dim


def test_a_tensor_born_with_fewer_than_two_dims_stays_nd_when_cast_to_nz():
    # torch_npu keeps scalar and rank-1 storages ND; a flattened view of a
    # matrix still becomes FRACTAL_NZ (the storage was made 2-d).
    for t in (torch.rand(12).npu(), torch.tensor(3.0).npu()):
        out = torch_npu.npu_format_cast(t, 29)
        assert torch_npu.get_npu_format(out) == 2 and out.shape == t.shape
    flat = torch.rand(4, 8).npu().reshape(-1)
    assert torch_npu.get_npu_format(torch_npu.npu_format_cast(flat, 29)) == 29
    assert torch_npu.get_npu_format(torch_npu.npu_format_cast(torch.rand(4, 8).npu(), 29)) == 29


def test_a_weak_reference_keeps_the_format():
    nz = torch_npu.npu_format_cast(torch.rand(4, 8).npu(), 29)
    weak = torch_npu._C._weak_ref_tensor(nz)
    assert torch_npu.get_npu_format(weak) == 29 and weak.data_ptr() == nz.data_ptr()
    assert torch_npu.get_npu_format(torch_npu._C._weak_ref_tensor(torch.rand(4, 8).npu())) == 2


def test_format_cast_rejects_unknown_format():
    with pytest.raises(ValueError, match="unknown acl_format"):
        torch_npu.npu_format_cast(torch.randn(2).npu(), 77)
    with pytest.raises(RuntimeError, match="npu tensor"):
        torch_npu.npu_format_cast(torch.randn(2), 2)
