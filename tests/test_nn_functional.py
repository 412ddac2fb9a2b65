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


def test_pooling_backward_takes_int32_indices_like_ascend():
    # An Ascend chip's max-pool indices are int32; torch_npu's backward
    # kernels take any integer indices. Results equal cpu's with int64 ones.
    torch.manual_seed(0)
    x2, x3 = torch.randn(2, 3, 8, 8), torch.randn(1, 2, 6, 6, 6)
    cases = [
        (F.max_pool2d(x2, 2, 2, return_indices=True), x2,
         lambda g, x, i: torch.ops.aten.max_pool2d_with_indices_backward(g, x, [2, 2], [2, 2], [0, 0], [1, 1],
                                                                          False, i)),
        (F.max_pool3d(x3, 3, 3, return_indices=True), x3,
         lambda g, x, i: torch.ops.aten.max_pool3d_with_indices_backward(g, x, [3] * 3, [3] * 3, [0] * 3, [1] * 3,
                                                                          False, i)),
        (F.adaptive_max_pool2d(x2, 3, return_indices=True), x2, torch.ops.aten.adaptive_max_pool2d_backward),
        (F.adaptive_max_pool3d(x3, 3, return_indices=True), x3, torch.ops.aten.adaptive_max_pool3d_backward),
    ]
    for (y, indices), x, backward in cases:
        g = torch.randn_like(y)
        expected = backward(g, x, indices)
        for dtype in (torch.int32, torch.int8 if indices.max() < 128 else torch.int16):
            got = backward(g.npu(), x.npu(), indices.to(dtype).npu())
            assert torch.equal(got.cpu(), expected), (backward, dtype)
    out = torch.empty(0, device="npu")
    (y, indices), x = F.adaptive_max_pool2d(x2, 3, return_indices=True), x2
    g = torch.randn_like(y)
    torch.ops.aten.adaptive_max_pool2d_backward.grad_input(g.npu(), x.npu(), indices.int().npu(), grad_input=out)
    assert torch.equal(out.cpu(), torch.ops.aten.adaptive_max_pool2d_backward(g, x, indices))
    # Indices that are not integers get ATen's own error, as on cpu.
    with pytest.raises(RuntimeError, match="expected scalar type Long but found Float"):
        torch.ops.aten.adaptive_max_pool2d_backward(g.npu(), x.npu(), indices.float().npu())


def test_multilabel_margin_loss_takes_int32_targets_like_ascend():
    # torch_npu's kernel takes int32 targets; ATen's takes int64 only (cpu refuses).
    torch.manual_seed(0)
    x = torch.randn(3, 5)
    target = torch.tensor([[3, 0, -1, 1, 2], [1, -1, 0, 0, 0], [4, 2, 1, 0, -1]])
    for reduction in ("mean", "sum", "none"):
        leaf = x.clone().requires_grad_()
        expected = F.multilabel_margin_loss(leaf, target, reduction=reduction)
        expected.sum().backward()
        npu_leaf = x.npu().requires_grad_()
        got = F.multilabel_margin_loss(npu_leaf, target.int().npu(), reduction=reduction)
        got.sum().backward()
        torch.testing.assert_close(got.detach().cpu(), expected.detach())
        torch.testing.assert_close(npu_leaf.grad.cpu(), leaf.grad)
    with pytest.raises(RuntimeError, match="expected scalar type Long but found Int"):
        F.multilabel_margin_loss(x, target.int())
    with pytest.raises(RuntimeError, match="expected scalar type Long but found Float"):
        F.multilabel_margin_loss(x.npu(), target.float().npu())


@pytest.mark.parametrize("dims", [2, 3])
def test_max_unpool_with_repeated_indices_is_deterministic(dims):
    # Every input names output element 0: ATen's CPU kernel scatters in
    # parallel chunks, so on cpu the winner varies; on npu the last input
    # wins, every time (real torch_npu's tests compare two such calls).
    torch.manual_seed(0)
    x = torch.randn((1, 1) + (32,) * dims if dims == 3 else (1, 1, 256, 256))
    indices = torch.zeros_like(x, dtype=torch.long)
    unpool = torch.ops.aten.max_unpool3d if dims == 3 else torch.ops.aten.max_unpool2d
    extra = ([1] * 3, [0] * 3) if dims == 3 else ()
    size = [x.shape[-1] + 1] * dims
    last = x.flatten()[-1]
    threads = torch.get_num_threads()
    for _ in range(10):
        out = unpool(x.npu(), indices.npu(), size, *extra).cpu()
        assert out.flatten()[0] == last and out.flatten()[1:].eq(0).all()
    assert torch.get_num_threads() == threads  # the caller's intra-op threads are restored
    with pytest.raises(RuntimeError, match="Found an invalid max index"):
        unpool(x.npu(), torch.full_like(indices, 10**9).npu(), size, *extra)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_bce_with_logits_in_half_precision_rounds_once_like_the_chip(dtype, reduction):
    # The chip computes in float32 and rounds once: npu equals float32 cpu
    # rounded to the dtype (ATen's half composite rounds at every step).
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(10, 64, generator=g) * 2).to(dtype)
    target = torch.randint(0, 2, (10, 64), generator=g).to(dtype)
    weight = (torch.rand(10, 1, generator=g) * 2).to(dtype)
    pos_weight = (torch.rand(64, generator=g) * 2).to(dtype)
    expected = F.binary_cross_entropy_with_logits(x.float(), target.float(), weight=weight.float(),
                                                  pos_weight=pos_weight.float(), reduction=reduction).to(dtype)
    xn = x.npu().requires_grad_()
    got = F.binary_cross_entropy_with_logits(xn, target.npu(), weight=weight.npu(), pos_weight=pos_weight.npu(),
                                             reduction=reduction)
    assert got.dtype == dtype and torch.equal(got.cpu(), expected)
    got.sum().backward()  # ATen's derivative formula, in the input dtype
    xc = x.clone().requires_grad_()
    F.binary_cross_entropy_with_logits(xc, target, weight=weight, pos_weight=pos_weight,
                                       reduction=reduction).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)


def test_dropout_and_relu_results_keep_a_permuted_inputs_order_like_cpu():
    # CPU's element-wise results are dense in the input's dimension order
    # (TensorIterator); real torch_npu's dropout keeps it too.
    import itertools
    base = torch.ones(2, 3, 4, 5)
    for perm in itertools.permutations(range(4)):
        inverse = [perm.index(i) for i in range(4)]
        for shift in ((0, 0), (1, 0), (0, 1)):
            x = base.permute(perm).contiguous().permute(inverse)[shift[0]:, shift[1]:]
            for fn in (torch.nn.Dropout(0.3), torch.relu):
                got = fn(x.npu())
                assert got.permute(perm).is_contiguous(), (perm, shift, fn)
                assert got.stride() == fn(x).stride(), (perm, shift, fn)
            grad = torch.ops.aten.native_dropout_backward(x.npu(), x.npu().bool(), 2.0)
            assert grad.stride() == (x * x.bool() * 2.0).stride()


@pytest.mark.parametrize("shape", [(6, 5), (4, 3, 5), (2, 3, 4, 5)])
def test_batch_norm_training_on_a_strided_input_matches_cpus_contiguous_result(shape):
    # ATen's CPU native_batch_norm.out (which the npu kernel runs) computes
    # wrong statistics for a transposed input in training: the kernel must
    # not inherit that (the functional CPU form is right, and is the reference).
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g)
    cpu = nn.BatchNorm1d(shape[1]) if len(shape) < 4 else nn.BatchNorm2d(shape[1])
    npu = copy.deepcopy(cpu).npu()
    strided = x.npu().transpose(0, -1).contiguous().transpose(0, -1).requires_grad_()
    assert not strided.is_contiguous()
    leaf = x.clone().requires_grad_()
    want, got = cpu(leaf), npu(strided)
    torch.testing.assert_close(got.cpu(), want)
    torch.testing.assert_close(npu.running_mean.cpu(), cpu.running_mean)
    torch.testing.assert_close(npu.running_var.cpu(), cpu.running_var)
    grad = torch.randn(shape, generator=g)
    want.backward(grad)
    got.backward(grad.npu())
    torch.testing.assert_close(strided.grad.cpu(), leaf.grad)


@pytest.mark.parametrize("module", [nn.ReplicationPad2d((1, 2, 3, 0)), nn.ReplicationPad3d((1, 2, 1, 0, 1, 1)),
                                    nn.ReflectionPad3d(1), nn.ReflectionPad2d(1)], ids=lambda m: type(m).__name__)
def test_padding_a_channels_last_input_matches_cpu_in_value_and_layout(module):
    # ATen's CPU kernels of these pads restride their output to the input's
    # layout themselves; the npu output must be given that layout up front
    # (Note [Outputs laid out like the input]), or it reads back scrambled.
    g = torch.Generator().manual_seed(0)
    dims = 5 if "3d" in type(module).__name__ else 4
    fmt = torch.channels_last_3d if dims == 5 else torch.channels_last
    x = torch.randn((2, 3, 4, 5, 6)[:dims], generator=g).contiguous(memory_format=fmt)
    cpu_in, npu_in = x.clone().requires_grad_(), x.npu().requires_grad_()
    want, got = module(cpu_in), module(npu_in)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got.cpu(), want)
    grad = torch.randn(want.shape, generator=g)
    want.backward(grad)
    got.backward(grad.npu())
    assert npu_in.grad.stride() == cpu_in.grad.stride()
    torch.testing.assert_close(npu_in.grad.cpu(), cpu_in.grad)


def test_padding_into_an_out_tensor_takes_the_inputs_layout_as_on_cpu():
    x = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    want, got = torch.empty(2, 3, 7, 8), torch.empty(2, 3, 7, 8, device="npu")
    torch._C._nn.replication_pad2d(x, [1, 2, 3, 0], out=want)
    torch._C._nn.replication_pad2d(x.npu(), [1, 2, 3, 0], out=got)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got.cpu(), want)


def test_embedding_bag_refuses_per_sample_weights_of_another_dtype_in_the_devices_words():
    bag = nn.EmbeddingBag(5, 2, mode="sum").npu()
    indices = torch.tensor([3, 1, 1, 1, 4, 0], device="npu")
    offsets = torch.tensor([0, 0, 3, 3, 6], device="npu")
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        bag(indices, offsets, per_sample_weights=torch.randn(6, dtype=torch.double, device="npu"))
    weights = torch.randn(6)
    want = bag.cpu()(indices.cpu(), offsets.cpu(), per_sample_weights=weights)
    got = bag.npu()(indices, offsets, per_sample_weights=weights.npu())
    torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_chunked_linear_cross_entropy_in_bfloat16_accumulates_like_cpu(reduction):
    # Its "auto" options accumulate half-precision in float32 on cpu (and on
    # CUDA); npu takes the same choice (torch_npu/_linear_cross_entropy.py),
    # so results and gradients equal cpu's instead of drifting.
    from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 5, generator=g).bfloat16()
    w = torch.randn(4, 5, generator=g).bfloat16()
    target = torch.randint(0, 4, (8,), generator=g)
    results = []
    for device in ("cpu", "npu"):
        xi, wi = x.detach().to(device).requires_grad_(), w.detach().to(device).requires_grad_()
        loss = F.linear_cross_entropy(xi, wi, target.to(device), reduction=reduction,
                                      options=LinearCrossEntropyOptions(allow_retain_graph=True))
        loss.backward(torch.ones_like(loss))
        results.append([t.cpu() for t in (loss, xi.grad, wi.grad)])
    for got, want in zip(results[1], results[0]):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
