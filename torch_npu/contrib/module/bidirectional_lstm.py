"""BiLSTM: a bidirectional LSTM built from two one-directional ones.

Written when the device's LSTM kernel had no ``bidirectional=True``: one LSTM
reads the sequence forwards, a second reads it time-reversed, and the second's
output is reversed back so that both halves of each output step describe the
same input step. Real torch_npu has since deprecated it (torch.nn.LSTM with
bidirectional=True works), and warns on construction.

Inputs are sequence-first, (seq, batch, input_size) or unbatched (seq, input_size).
"""

from warnings import warn

import torch
from torch import nn

__all__ = ["BiLSTM"]


def _warn_deprecated():
    warn("torch_npu.contrib.BiLSTM is deprecated. Please check document for replacement.", FutureWarning)


def _per_step_outputs(lstm, sequence, backwards):
    """What ``lstm`` outputs at each step of ``sequence`` (its final (h, c) are
    not part of BiLSTM's result), in input order even when it reads the
    sequence last step first."""
    if backwards:
        return _per_step_outputs(lstm, sequence.flip(0), False).flip(0)  # time is dimension 0
    return lstm(sequence)[0]


class BiLSTM(nn.Module):
    """BiLSTM(input_size, hidden_size): output (seq, batch, 2 * hidden_size), forward half first.

    The two directions are the submodules ``fw_rnn`` and ``bw_rnn`` (their
    parameters are the state_dict keys); their weights correspond to
    torch.nn.LSTM's ``*_l0`` and ``*_l0_reverse``.
    """

    def __init__(self, input_size, hidden_size):
        _warn_deprecated()
        nn.Module.__init__(self)
        self.fw_rnn, self.bw_rnn = (nn.LSTM(input_size, hidden_size) for _direction in range(2))

    def forward(self, inputs):
        directions = ((self.fw_rnn, False), (self.bw_rnn, True))
        return torch.cat([_per_step_outputs(lstm, inputs, backwards) for lstm, backwards in directions], dim=-1)
