"""torch_npu.print_npugraph_tensor / save_npugraph_tensor: a tensor's values
printed or saved when the stream (or each replay of a captured graph) gets
there, not when the Python line runs."""

import os

import pytest
import torch

import torch_npu
import torch_npu.npu.graphs as graphs


def _capture(fn):
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        fn()
    return g


def test_print_shows_the_values_of_each_replay(capsys):
    x = torch.zeros(2, 3, device="npu")
    g = _capture(lambda: (x.add_(1), torch_npu.print_npugraph_tensor(x, tensor_name="x")))
    torch.npu.synchronize()
    assert capsys.readouterr().out == ""  # the capture prints nothing
    g.replay()
    g.replay()
    torch.npu.synchronize()
    out = capsys.readouterr().out
    ones, twos = torch.ones(2, 3), torch.full((2, 3), 2.0)
    assert out == f"x={ones}, shape=(2, 3), dtype=torch.float32\nx={twos}, shape=(2, 3), dtype=torch.float32\n"


def test_print_of_a_strided_view_and_outside_a_graph(capsys):
    x = torch.arange(6.0, device="npu").reshape(2, 3)
    torch.ops.npu.print_npugraph_tensor(x.t())  # eager: in stream order
    torch.npu.synchronize()
    out = capsys.readouterr().out
    assert out.startswith("tensor([[0., 3.],") and "shape=(3, 2)" in out
    torch_npu.print_npugraph_tensor(torch.ones(1, dtype=torch.int32), tensor_name="c")  # a CPU tensor: at once
    assert capsys.readouterr().out.startswith("c=tensor([1], dtype=torch.int32)")


def test_save_names_files_per_device_with_a_counter(tmp_path):
    x = torch.arange(6.0, device="npu").reshape(2, 3)
    path = str(tmp_path / "t.pt")
    g = _capture(lambda: torch.ops.npu.save_npugraph_tensor(x, save_path=path))
    x.mul_(2)
    g.replay()
    torch.npu.synchronize()
    assert torch.equal(torch.load(tmp_path / "t_device_0_0.pt"), torch.arange(6.0).reshape(2, 3) * 2)
    torch_npu.save_npugraph_tensor([x, x.half()], save_path=path)  # a list, eager: the next number
    torch.npu.synchronize()
    saved = torch.load(tmp_path / "t_device_0_1.pt")
    assert len(saved) == 2 and saved[1].dtype == torch.float16
    torch_npu.save_npugraph_tensor(x, save_path=path, overwrite=True)
    torch.npu.synchronize()
    assert os.path.exists(tmp_path / "t_device_0.pt")


def test_the_specs_round_trip():
    t = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    spec = graphs._make_npugraph_tensor_ptr_spec(t)
    assert spec[0] == graphs._NPUGRAPH_TENSOR_PTR_SPEC_MARKER and spec[2] == 24
    assert torch.equal(graphs._materialize_npugraph_tensor_arg(spec), t)
    buffer = (graphs._NPUGRAPH_TENSOR_BUFFER_SPEC_MARKER, bytearray(t.numpy().tobytes()), (2, 3), torch.int32)
    assert torch.equal(graphs._materialize_npugraph_tensor_arg([buffer])[0], t)


def test_bad_input():
    x = torch.ones(2, device="npu")
    with pytest.raises(ValueError, match="must include a file name"):
        torch_npu.save_npugraph_tensor(x, save_path="dir/")
    with pytest.raises(ValueError, match="must not be empty"):
        torch.ops.npu.save_npugraph_tensor.tensor_list([])
    with pytest.raises(ValueError, match="same device"):
        torch.ops.npu.save_npugraph_tensor.tensor_list([x, torch.ones(2)])
