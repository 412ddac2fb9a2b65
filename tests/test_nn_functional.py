"""The nn surface models use, forward and backward, npu against cpu.

Each case runs a module (or function) on cpu and on a deep copy on npu with
the same inputs, then compares outputs, input gradients and parameter
gradients, and checks that nothing took the CPU fallback.
"""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_npu import _C


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _cases():
    torch.manual_seed(0)
    x1, x2, x3 = torch.randn(2, 4, 16), torch.randn(2, 4, 8, 8), torch.randn(2, 4, 4, 6, 6)
    q = torch.randn(2, 3, 5, 8)
    return {
        "conv1d": (nn.Conv1d(4, 6, 3, padding=1), (x1,)),
        "conv2d_groups_stride": (nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), (x2,)),
        "conv3d": (nn.Conv3d(4, 6, 3), (x3,)),
        "conv_transpose2d": (nn.ConvTranspose2d(4, 3, 3, stride=2, output_padding=1), (x2,)),
        "max_pool2d": (nn.MaxPool2d(2), (x2,)),
        "avg_pool2d": (nn.AvgPool2d(2), (x2,)),
        "adaptive_avg_pool2d": (nn.AdaptiveAvgPool2d((3, 3)), (x2,)),
        "adaptive_max_pool2d": (nn.AdaptiveMaxPool2d((3, 3)), (x2,)),
        "interpolate_bilinear": (Fn(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear")), (x2,)),
        "interpolate_nearest": (Fn(lambda x: F.interpolate(x, scale_factor=2, mode="nearest")), (x2,)),
        "batch_norm_train": (nn.BatchNorm2d(4), (x2,)),
        "group_norm": (nn.GroupNorm(2, 4), (x2,)),
        "instance_norm": (nn.InstanceNorm2d(4, affine=True), (x2,)),
        "layer_norm": (nn.LayerNorm(16), (x1,)),
        "embedding_bag": (nn.EmbeddingBag(10, 5, mode="mean"), (torch.randint(0, 10, (4, 3)),)),
        "lstm": (nn.LSTM(16, 8, batch_first=True), (x1,)),
        "gru_2_layers": (nn.GRU(16, 8, num_layers=2), (x1,)),
        "rnn_tanh": (nn.RNN(16, 8), (x1,)),
        "sdpa_causal": (Fn(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True)),
                        (q, q.clone(), q.clone())),
        "transformer_encoder_layer": (nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True),
                                      (torch.randn(2, 5, 16),)),
        "cross_entropy": (Fn(F.cross_entropy), (torch.randn(8, 5), torch.randint(0, 5, (8,)))),
        "bce_with_logits": (Fn(F.binary_cross_entropy_with_logits), (torch.randn(8), torch.rand(8))),
        "mse_loss": (Fn(F.mse_loss), (torch.randn(8), torch.randn(8))),
        "smooth_l1_loss": (Fn(F.smooth_l1_loss), (torch.randn(8), torch.randn(8))),
        "kl_div": (Fn(lambda x, t: F.kl_div(x, t, reduction="batchmean")),
                   (torch.randn(8, 4).log_softmax(-1), torch.rand(8, 4))),
        "nll_loss2d": (Fn(F.nll_loss), (torch.randn(2, 3, 4, 4).log_softmax(1), torch.randint(0, 3, (2, 4, 4)))),
    }


CASES = _cases()


def _first(out):
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_backward_matches_cpu(name):
    module, inputs = CASES[name]
    cpu_mod, npu_mod = copy.deepcopy(module), copy.deepcopy(module).npu()
    cpu_in = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    npu_in = [x.detach().npu().requires_grad_(x.is_floating_point()) for x in inputs]
    _C._reset_fallback_counts()
    cpu_out, npu_out = _first(cpu_mod(*cpu_in)), _first(npu_mod(*npu_in))
    cpu_out.float().sum().backward()
    npu_out.float().sum().backward()
    torch.testing.assert_close(npu_out.cpu(), cpu_out, atol=1e-5, rtol=1e-5)
    for a, b in zip(cpu_in, npu_in):
        if a.grad is not None:
            torch.testing.assert_close(b.grad.cpu(), a.grad, atol=1e-5, rtol=1e-5)
    for a, b in zip(cpu_mod.parameters(), npu_mod.parameters()):
        if a.grad is not None:
            torch.testing.assert_close(b.grad.cpu(), a.grad, atol=1e-5, rtol=1e-5)
    for a, b in zip(cpu_mod.buffers(), npu_mod.buffers()):  # batch norm running stats
        torch.testing.assert_close(b.cpu(), a, atol=1e-5, rtol=1e-5)
    assert _C._fallback_counts() == {}
