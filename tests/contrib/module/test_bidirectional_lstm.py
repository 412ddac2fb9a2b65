"""torch_npu.contrib.module.bidirectional_lstm: BiLSTM equals torch's bidirectional LSTM."""

import pytest
import torch
import torch.nn as nn
from torch.testing import assert_close

from torch_npu.contrib import module as cm

from contrib.inputs import NPU, rnd


def test_bilstm_equals_torch_bidirectional_lstm():
    torch.manual_seed(0)
    with pytest.warns(FutureWarning):
        model = cm.BiLSTM(8, 4)
    ref = nn.LSTM(8, 4, bidirectional=True)
    with torch.no_grad():
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(ref, name).copy_(getattr(model.fw_rnn, name))
            getattr(ref, name + "_reverse").copy_(getattr(model.bw_rnn, name))
    x = rnd(5, 3, 8, seed=82)
    a = x.clone().to(NPU).requires_grad_()
    out = model.to(NPU)(a)
    r = x.clone().requires_grad_()
    ref_out, _ = ref(r)
    assert out.shape == (5, 3, 8)
    assert_close(out.detach().cpu(), ref_out.detach(), atol=1e-5, rtol=1e-4)
    out.sum().backward()
    ref_out.sum().backward()
    assert_close(a.grad.cpu(), r.grad, atol=1e-5, rtol=1e-4)


def test_bilstm_state_dict_keys_and_unbatched_input():
    with pytest.warns(FutureWarning, match="BiLSTM is deprecated"):
        model = cm.BiLSTM(3, 2)
    assert sorted(model.state_dict()) == sorted(f"{d}_rnn.{w}_{m}_l0" for d in ("fw", "bw")
                                                for w in ("weight", "bias") for m in ("ih", "hh"))
    x = rnd(4, 3, seed=83)
    out = model.to(NPU)(x.to(NPU))
    batched = model(x.to(NPU)[:, None])
    assert out.shape == (4, 4)
    assert_close(out.cpu(), batched[:, 0].cpu(), atol=1e-6, rtol=1e-5)
