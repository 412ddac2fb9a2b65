"""BiLSTM: a bidirectional LSTM built from two one-directional ones.

Written when the device's LSTM kernel had no ``bidirectional=True``: one LSTM
reads the sequence forwards, a second reads it time-reversed, and the second's
output is reversed back so that both halves of each output step describe the
same input step. Real torch_npu has since deprecated it (torch.nn.LSTM with
bidirectional=True works), and warns on construction.

Inputs are sequence-first, (seq, batch, input_size) or unbatched (seq, input_size).
"""

import warnings

import torch
import torch.nn as nn

__all__ = ["BiLSTM"]

_DEPRECATION = "torch_npu.contrib.BiLSTM is deprecated. Please check document for replacement."
_TIME_DIM = 0


class BiLSTM(nn.Module):
    """BiLSTM(input_size, hidden_size): output (seq, batch, 2 * hidden_size), forward half first.

    The two directions are the submodules ``fw_rnn`` and ``bw_rnn`` (their
    parameters are the state_dict keys); their weights correspond to
    torch.nn.LSTM's ``*_l0`` and ``*_l0_reverse``.
    """

    def __init__(self, input_size, hidden_size):
        super().__init__()
        warnings.warn(_DEPRECATION, FutureWarning)
        self.fw_rnn, self.bw_rnn = (nn.LSTM(input_size, hidden_size) for _direction in range(2))

    def forward(self, inputs):
        forwards = _outputs(self.fw_rnn, inputs)
        backwards = _time_reversed(_outputs(self.bw_rnn, _time_reversed(inputs)))
        return torch.cat([forwards, backwards], dim=-1)


def _time_reversed(seq):
    return torch.flip(seq, dims=[_TIME_DIM])


def _outputs(lstm, seq):
    # The per-step outputs; the final (h, c) states are not part of BiLSTM's result.
    return lstm(seq)[0]
