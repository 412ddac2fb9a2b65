"""torch_npu.op_plugin.rnn: npu_lstm, npu_gru and npu_lstm_cell against torch's LSTM, GRU
and lstm_cell, with gradients, and what vNPU does not support."""

import pytest
import torch
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import gen, rnd


@pytest.mark.parametrize("batch_first", [False, True])
def test_lstm_matches_torch_lstm_with_gradients(batch_first):
    steps, batch, isize, hid = 5, 3, 4, 6
    g = gen(90)
    ref = torch.nn.LSTM(isize, hid, batch_first=batch_first)
    with torch.no_grad():
        ref.bias_hh_l0.zero_()  # npu_lstm has one bias
    x = torch.randn((batch, steps, isize) if batch_first else (steps, batch, isize), generator=g)
    h0, c0 = torch.randn(1, batch, hid, generator=g), torch.randn(1, batch, hid, generator=g)
    weight = torch.cat([ref.weight_ih_l0.t(), ref.weight_hh_l0.t()], 0).detach()
    bias = ref.bias_ih_l0.detach()
    xn, wn = x.npu().requires_grad_(), weight.npu().requires_grad_()
    y, h, c, i, j, f, o, tanhc = torch_npu.npu_lstm(xn, wn, bias.npu(), torch.zeros(0).npu(), h0.npu(), c0.npu(),
                                                    True, 1, 0.0, True, False, batch_first, False, False)
    xr = x.clone().requires_grad_()
    y_ref, (h_ref, c_ref) = ref(xr, (h0, c0))
    assert_close(y.cpu(), y_ref.detach(), atol=1e-5, rtol=1e-4)
    last = (slice(None), -1) if batch_first else (-1,)
    assert_close(h[last].cpu(), h_ref[0].detach(), atol=1e-5, rtol=1e-4)
    assert_close(c[last].cpu(), c_ref[0].detach(), atol=1e-5, rtol=1e-4)
    assert_close(tanhc.cpu(), torch.tanh(c.cpu()))
    assert_close(h.cpu(), (o * tanhc).cpu())
    gy = torch.randn(y_ref.shape, generator=g)
    y.backward(gy.npu())
    y_ref.backward(gy)
    assert_close(xn.grad.cpu(), xr.grad, atol=1e-5, rtol=1e-4)
    assert_close(wn.grad.cpu()[:isize], ref.weight_ih_l0.grad.t(), atol=1e-5, rtol=1e-4)


def test_gru_matches_torch_gru_with_gradients():
    steps, batch, isize, hid = 6, 3, 5, 4
    g = gen(91)
    ref = torch.nn.GRU(isize, hid)
    x = torch.randn(steps, batch, isize, generator=g)
    h0 = torch.randn(1, batch, hid, generator=g)
    xn = x.npu().requires_grad_()
    args = [w.detach().npu() for w in (ref.weight_ih_l0.t(), ref.weight_hh_l0.t(), ref.bias_ih_l0, ref.bias_hh_l0)]
    y, out_h, z, r, n, hn = torch_npu.npu_gru(xn, h0.npu(), *args, torch.tensor([steps], dtype=torch.int32).npu(),
                                              has_biases=True, num_layers=1, dropout=0.0, train=True,
                                              bidirectional=False, batch_first=False)
    xr = x.clone().requires_grad_()
    y_ref, h_ref = ref(xr, h0)
    assert_close(y.cpu(), y_ref.detach(), atol=1e-5, rtol=1e-4)
    assert_close(out_h[-1].cpu(), h_ref[0].detach(), atol=1e-5, rtol=1e-4)
    prev = torch.cat([h0, out_h.cpu()[:-1]])
    assert_close(out_h.cpu(), (1 - z.cpu()) * n.cpu() + z.cpu() * prev)
    assert_close(hn.cpu(), prev @ ref.weight_hh_l0.detach()[2 * hid:].t() + ref.bias_hh_l0.detach()[2 * hid:])
    gy = torch.randn(y_ref.shape, generator=g)
    y.backward(gy.npu())
    y_ref.backward(gy)
    assert_close(xn.grad.cpu(), xr.grad, atol=1e-5, rtol=1e-4)


def test_rnn_not_supported_and_checks():
    x, h = torch.zeros(2, 1, 3).npu(), torch.zeros(1, 1, 2).npu()
    w, b = torch.zeros(5, 8).npu(), torch.zeros(8).npu()
    lstm = lambda **kw: torch_npu.npu_lstm(x, kw.get("w", w), b, b, h, h, True, kw.get("layers", 1), 0.0, True,
                                           kw.get("bi", False), False, kw.get("flag_seq", False), False)
    for kw, what in (({"layers": 2}, "num_layers=2"), ({"bi": True}, "bidirectional"),
                     ({"flag_seq": True}, "flag_seq")):
        with pytest.raises(RuntimeError, match=f"{what}.*not supported on vNPU"):
            lstm(**kw)
    with pytest.raises(RuntimeError, match="input_size \\+ hidden = 5 rows"):
        lstm(w=torch.zeros(6, 8).npu())
    wi, wh, bb = torch.zeros(3, 6).npu(), torch.zeros(2, 6).npu(), torch.zeros(6).npu()
    with pytest.raises(RuntimeError, match="seq_length shorter than the input.*not supported on vNPU"):
        torch_npu.npu_gru(x, h, wi, wh, bb, bb, torch.tensor([1]).npu(), True, 1, 0.0, True, False, False)


def test_lstm_cell_matches_torch_lstm_cell_with_gradients():
    """Real torch_npu's test_npu_lstm_cell: h and c as _VF.lstm_cell with the weights transposed."""
    from torch import _VF
    x, h, c = rnd(3, 8, seed=1), rnd(3, 7, seed=2), rnd(3, 7, seed=3)
    w_ih, w_hh, b_ih, b_hh = rnd(8, 28, seed=4), rnd(7, 28, seed=5), rnd(28, seed=6), rnd(28, seed=7)
    cpu = [t.clone().requires_grad_() for t in (x, h, c, w_ih, w_hh, b_ih, b_hh)]
    npu = [t.npu().requires_grad_() for t in (x, h, c, w_ih, w_hh, b_ih, b_hh)]
    h_ref, c_ref = _VF.lstm_cell(cpu[0], (cpu[1], cpu[2]), cpu[3].t(), cpu[4].t(), cpu[5], cpu[6])
    y, h_out, c_out, i, j, f, o, tanhc = torch_npu.npu_lstm_cell(npu[0], npu[3], npu[4], npu[1], npu[2], npu[5],
                                                                 npu[6])
    assert_close(h_out.cpu(), h_ref)
    assert_close(y.cpu(), h_ref)
    assert_close(c_out.cpu(), c_ref)
    assert_close(tanhc.cpu(), torch.tanh(c_ref))
    assert_close((f * npu[2] + i * j).cpu(), c_ref)  # the gates are the ones c was made of
    assert_close((o * tanhc).cpu(), h_ref)
    (h_ref.sum() + 2 * c_ref.sum()).backward()
    (h_out.sum() + 2 * c_out.sum()).backward()
    for a, b in zip(cpu, npu):
        assert_close(b.grad.cpu(), a.grad)


def test_lstm_cell_without_bias_and_fp16():
    from torch import _VF
    x, h, c = rnd(3, 8, seed=1), rnd(3, 7, seed=2), rnd(3, 7, seed=3)
    w_ih, w_hh = rnd(8, 28, seed=4) * 0.3, rnd(7, 28, seed=5) * 0.3
    h_ref, c_ref = _VF.lstm_cell(x, (h, c), w_ih.t(), w_hh.t())
    out = torch_npu.npu_lstm_cell(*(t.half().npu() for t in (x, w_ih, w_hh, h, c)))
    assert out[1].dtype == torch.float16
    assert_close(out[1].float().cpu(), h_ref, atol=3e-3, rtol=3e-3)
    assert_close(out[2].float().cpu(), c_ref, atol=3e-3, rtol=3e-3)


def test_lstm_cell_bad_input():
    x, h, c = torch.zeros(3, 8).npu(), torch.zeros(3, 7).npu(), torch.zeros(3, 7).npu()
    with pytest.raises(RuntimeError, match="w_ih"):
        torch_npu.npu_lstm_cell(x, torch.zeros(9, 28).npu(), torch.zeros(7, 28).npu(), h, c)
    with pytest.raises(RuntimeError, match="w_hh"):
        torch_npu.npu_lstm_cell(x, torch.zeros(8, 28).npu(), torch.zeros(7, 24).npu(), h, c)
    with pytest.raises(RuntimeError, match="c should be"):
        torch_npu.npu_lstm_cell(x, torch.zeros(8, 28).npu(), torch.zeros(7, 28).npu(), h, torch.zeros(2, 7).npu())
