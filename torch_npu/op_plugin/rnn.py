"""The DynamicRNN-style recurrent operators: npu_lstm, npu_lstm_cell and npu_gru.

One layer, one direction, every time step returned. Weights are packed as
the Ascend kernels take them, transposed against torch's:

- npu_lstm: ``weight`` (input_size + hidden, 4 * hidden) = cat(W_ih^T, W_hh^T)
  with the gates in torch's order (i, f, g, o); ``bias`` (4 * hidden) is the
  one bias (torch's b_ih, with b_hh = 0). Returns (y, h, c, i, j, f, o, tanhc),
  each (T, B, hidden): the outputs, hidden and cell states of every step, the
  input / candidate (j = tanh(g)) / forget / output gates and tanh(c).
- npu_lstm_cell: one step of npu_lstm, with ``w_ih`` (input_size, 4 * hidden)
  = W_ih^T and ``w_hh`` (hidden, 4 * hidden) = W_hh^T separate and torch's two
  optional biases; the same eight outputs, each (B, hidden).
- npu_gru: ``weight_input`` (input_size, 3 * hidden) = W_ih^T and
  ``weight_hidden`` (hidden, 3 * hidden) = W_hh^T, gates (r, z, n) as torch;
  returns (y, output_h, update, reset, new, hidden_new), each (T, B, hidden):
  z, r, n and W_hn h + b_hn of every step (what the backward operator reads).

This is torch's recurrence (torch.nn.LSTM / GRU), which real torch_npu's
test_npu_lstm / test_npu_gru compare against; the gradients come from
autograd through the loop over time. With batch_first the time axis is the
second one, in and out. Not supported on vNPU, with a RuntimeError:
num_layers > 1, bidirectional, npu_lstm's flag_seq (masked variable-length
sequences) and direction=True, and npu_gru sequence lengths shorter than the
input (checked on the host, which waits for ``seq_length``). dropout applies
between layers only, so one layer has none, as in torch.
"""

import torch

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define


def _not_supported(fn, what):
    raise RuntimeError(f"{fn}: {what} is not supported on vNPU (one layer, one direction, full sequences).")


def _common_checks(fn, x, num_layers, bidirectional, batch_first):
    if num_layers != 1:
        _not_supported(fn, f"num_layers={num_layers}")
    if bidirectional:
        _not_supported(fn, "bidirectional=True")
    check(x.dim() == 3, f"{fn}: input should be 3-D (seq_len, batch, input_size), got {x.dim()} dimensions.")
    return x.transpose(0, 1) if batch_first else x


def _initial_state(fn, name, t, batch, hidden):
    check(t.numel() == batch * hidden,
          f"{fn}: {name} should have shape (1, {batch}, {hidden}), got {list(t.shape)}.")
    return t.reshape(batch, hidden)


def _out(steps, batch_first):
    y = torch.stack(steps)
    return y.transpose(0, 1) if batch_first else y


def npu_lstm(x, weight, bias, seq_mask, h, c, has_biases, num_layers, dropout, train, bidirectional, batch_first,
             flag_seq, direction):
    fn = "npu_lstm"
    x = _common_checks(fn, x, num_layers, bidirectional, batch_first)
    if flag_seq:
        _not_supported(fn, "flag_seq=True (masked sequences)")
    if direction:
        _not_supported(fn, "direction=True")
    steps, batch, input_size = x.shape
    check(weight.dim() == 2 and weight.shape[1] % 4 == 0, f"{fn}: weight should be (input_size + hidden, "
          f"4 * hidden), got {list(weight.shape)}.")
    hidden = weight.shape[1] // 4
    check(weight.shape[0] == input_size + hidden,
          f"{fn}: weight should have input_size + hidden = {input_size + hidden} rows, got {weight.shape[0]}.")
    w_ih, w_hh = weight[:input_size], weight[input_size:]
    h_t = _initial_state(fn, "h", h, batch, hidden)
    c_t = _initial_state(fn, "c", c, batch, hidden)
    x_proj = torch.matmul(x, w_ih)
    if has_biases:
        x_proj = x_proj + bias
    outs = {k: [] for k in ("h", "c", "i", "j", "f", "o", "tanhc")}
    for t in range(steps):
        gates = x_proj[t] + torch.matmul(h_t, w_hh)
        i, f, g, o = gates.chunk(4, dim=-1)
        i, f, j, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
        c_t = f * c_t + i * j
        tanhc = torch.tanh(c_t)
        h_t = o * tanhc
        for k, v in (("h", h_t), ("c", c_t), ("i", i), ("j", j), ("f", f), ("o", o), ("tanhc", tanhc)):
            outs[k].append(v)
    y = _out(outs["h"], batch_first)
    return (y, y.clone(), *(_out(outs[k], batch_first) for k in ("c", "i", "j", "f", "o", "tanhc")))


def npu_lstm_cell(x, w_ih, w_hh, h, c, b_ih=None, b_hh=None):
    fn = "npu_lstm_cell"
    check(x.dim() == 2, f"{fn}: input should be (batch, input_size), got shape {list(x.shape)}.")
    check(w_ih.dim() == 2 and w_ih.shape[1] % 4 == 0 and w_ih.shape[0] == x.shape[1],
          f"{fn}: w_ih should be (input_size={x.shape[1]}, 4 * hidden), got {list(w_ih.shape)}.")
    hidden = w_ih.shape[1] // 4
    check(list(w_hh.shape) == [hidden, 4 * hidden],
          f"{fn}: w_hh should be (hidden, 4 * hidden) = {[hidden, 4 * hidden]}, got {list(w_hh.shape)}.")
    for name, t in (("h", h), ("c", c)):
        check(list(t.shape) == [x.shape[0], hidden],
              f"{fn}: {name} should be (batch, hidden) = {[x.shape[0], hidden]}, got {list(t.shape)}.")
    gates = torch.matmul(x, w_ih) + torch.matmul(h, w_hh)
    for b in (b_ih, b_hh):
        if b is not None:
            check(list(b.shape) == [4 * hidden], f"{fn}: biases should be (4 * hidden,), got {list(b.shape)}.")
            gates = gates + b
    i, f, g, o = gates.chunk(4, dim=-1)
    i, f, j, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    c_out = f * c + i * j
    tanhc = torch.tanh(c_out)
    h_out = o * tanhc
    return h_out, h_out.clone(), c_out, i, j, f, o, tanhc


def npu_gru(x, hx, weight_input, weight_hidden, bias_input, bias_hidden, seq_length, has_biases, num_layers,
            dropout, train, bidirectional, batch_first):
    fn = "npu_gru"
    x = _common_checks(fn, x, num_layers, bidirectional, batch_first)
    steps, batch, input_size = x.shape
    check(weight_input.dim() == 2 and weight_input.shape[0] == input_size and weight_input.shape[1] % 3 == 0,
          f"{fn}: weight_input should be (input_size={input_size}, 3 * hidden), got {list(weight_input.shape)}.")
    hidden = weight_input.shape[1] // 3
    check(list(weight_hidden.shape) == [hidden, 3 * hidden],
          f"{fn}: weight_hidden should be ({hidden}, {3 * hidden}), got {list(weight_hidden.shape)}.")
    if seq_length is not None and seq_length.numel() > 0 and bool((seq_length.cpu() < steps).any()):
        _not_supported(fn, "a seq_length shorter than the input")
    h_t = _initial_state(fn, "hx", hx, batch, hidden)
    x_proj = torch.matmul(x, weight_input)
    if has_biases:
        x_proj = x_proj + bias_input
    outs = {k: [] for k in ("h", "z", "r", "n", "hn")}
    for t in range(steps):
        h_proj = torch.matmul(h_t, weight_hidden)
        if has_biases:
            h_proj = h_proj + bias_hidden
        xr, xz, xn = x_proj[t].chunk(3, dim=-1)
        hr, hz, hn = h_proj.chunk(3, dim=-1)
        r = torch.sigmoid(xr + hr)
        z = torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        h_t = (1 - z) * n + z * h_t
        for k, v in (("h", h_t), ("z", z), ("r", r), ("n", n), ("hn", hn)):
            outs[k].append(v)
    y = _out(outs["h"], batch_first)
    return (y, y.clone(), *(_out(outs[k], batch_first) for k in ("z", "r", "n", "hn")))


define("npu_lstm(Tensor input, Tensor weight, Tensor bias, Tensor seq_mask, Tensor h, Tensor c, bool has_biases, "
       "int num_layers, float dropout, bool train, bool bidirectional, bool batch_first, bool flag_seq, "
       "bool direction) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", npu_lstm)
define("npu_lstm_cell(Tensor input, Tensor w_ih, Tensor w_hh, Tensor h, Tensor c, Tensor? b_ih=None, "
       "Tensor? b_hh=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", npu_lstm_cell)
define("npu_gru(Tensor input, Tensor hx, Tensor weight_input, Tensor weight_hidden, Tensor bias_input, "
       "Tensor bias_hidden, Tensor seq_length, bool has_biases, int num_layers, float dropout, bool train, "
       "bool bidirectional, bool batch_first) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", npu_gru)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
