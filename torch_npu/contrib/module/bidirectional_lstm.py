"""A bidirectional LSTM assembled from two unidirectional ones.

Real torch_npu's LSTM kernel did not support ``bidirectional=True``, so this
runs one LSTM over the sequence and another over the time-reversed sequence,
flips the second output back and concatenates the two along the features.
Deprecated in real torch_npu (torch.nn.LSTM(bidirectional=True) now works).
"""

import warnings

import torch

__all__ = ["BiLSTM"]


class BiLSTM(torch.nn.Module):
    """BiLSTM(input_size, hidden_size): (seq, batch, input_size) -> (seq, batch, 2 * hidden_size)."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        warnings.warn("torch_npu.contrib.BiLSTM is deprecated. "
                      "Please check document for replacement.", FutureWarning)
        self.fw_rnn = torch.nn.LSTM(input_size, hidden_size, bidirectional=False)
        self.bw_rnn = torch.nn.LSTM(input_size, hidden_size, bidirectional=False)

    def forward(self, inputs):
        forward_out, _ = self.fw_rnn(inputs)
        backward_out, _ = self.bw_rnn(torch.flip(inputs, [0]))
        return torch.cat((forward_out, torch.flip(backward_out, [0])), 2)
