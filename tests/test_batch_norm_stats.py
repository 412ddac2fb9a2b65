"""The CUDA-only batch-norm statistics operators SyncBatchNorm calls
(torch_npu/_batch_norm_stats.py), on npu against statistics computed on the
cpu; the two-rank SyncBatchNorm training is in test_distributed_training.py."""

import pytest
import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401


def _stats(x):
    dims = [0] + list(range(2, x.dim()))
    return x.mean(dims), torch.rsqrt(x.var(dims, unbiased=False) + 1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_stats_and_elemt_normalise_like_batch_norm(dtype):
    x = torch.randn(5, 4, 3, 6).to(dtype)
    mean, invstd = torch.batch_norm_stats(x.npu(), 1e-5)
    assert mean.dtype == invstd.dtype == torch.float32  # float statistics for half inputs, as CUDA
    ref_mean, ref_invstd = _stats(x.float())
    torch.testing.assert_close(mean.cpu(), ref_mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(invstd.cpu(), ref_invstd, rtol=1e-4, atol=1e-4)
    w, b = torch.randn(4), torch.randn(4)
    out = torch.batch_norm_elemt(x.npu(), w.npu(), b.npu(), mean, invstd, 1e-5)
    ref = F.batch_norm(x.float(), None, None, w, b, training=True, eps=1e-5)
    assert out.dtype == dtype
    torch.testing.assert_close(out.cpu().float(), ref, rtol=1e-2 if dtype == torch.float16 else 1e-5,
                               atol=1e-2 if dtype == torch.float16 else 1e-5)


def test_gathered_statistics_equal_those_of_the_concatenated_batch():
    parts = [torch.randn(n, 3, 4) for n in (2, 5, 1)]
    stats = [torch.batch_norm_stats(p.npu(), 1e-5) for p in parts]
    mean = torch.stack([m for m, _ in stats])
    invstd = torch.stack([s for _, s in stats])
    counts = torch.tensor([p.numel() // 3 for p in parts], dtype=torch.float32, device="npu")
    running_mean, running_var = torch.zeros(3, device="npu"), torch.ones(3, device="npu")
    g_mean, g_invstd = torch.batch_norm_gather_stats_with_counts(
        parts[0].npu(), mean, invstd, running_mean, running_var, 0.1, 1e-5, counts)
    whole = torch.cat(parts)
    ref_mean, ref_invstd = _stats(whole)
    torch.testing.assert_close(g_mean.cpu(), ref_mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g_invstd.cpu(), ref_invstd, rtol=1e-4, atol=1e-4)
    ref_rm, ref_rv = torch.zeros(3), torch.ones(3)
    F.batch_norm(whole, ref_rm, ref_rv, training=True, momentum=0.1, eps=1e-5)
    torch.testing.assert_close(running_mean.cpu(), ref_rm)
    torch.testing.assert_close(running_var.cpu(), ref_rv, rtol=1e-5, atol=1e-5)


def test_backward_reduce_and_elemt_give_batch_norms_gradients():
    x = torch.randn(6, 4, 5, requires_grad=True)
    w = torch.randn(4, requires_grad=True)
    b = torch.randn(4, requires_grad=True)
    dy = torch.randn(6, 4, 5)
    F.batch_norm(x, None, None, w, b, training=True, eps=1e-5).backward(dy)
    mean, invstd = torch.batch_norm_stats(x.detach().npu(), 1e-5)
    sum_dy, sum_dy_xmu, grad_w, grad_b = torch.batch_norm_backward_reduce(
        dy.npu(), x.detach().npu(), mean, invstd, w.detach().npu(), True, True, True)
    torch.testing.assert_close(grad_w.cpu(), w.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(grad_b.cpu(), b.grad, rtol=1e-4, atol=1e-4)
    count = torch.tensor([30], dtype=torch.int32, device="npu")
    grad_x = torch.batch_norm_backward_elemt(dy.npu(), x.detach().npu(), mean, invstd, w.detach().npu(),
                                             sum_dy, sum_dy_xmu, count)
    torch.testing.assert_close(grad_x.cpu(), x.grad, rtol=1e-4, atol=1e-4)
    # Outputs nobody asked for are empty.
    outs = torch.batch_norm_backward_reduce(dy.npu(), x.detach().npu(), mean, invstd, None, False, False, False)
    assert [o.numel() for o in outs] == [0, 0, 0, 0]


def test_inputs_without_a_channel_dimension_are_refused_with_the_operator_named():
    with pytest.raises(RuntimeError, match=r"batch_norm_stats: expected an input of at least 2 dimensions"):
        torch.batch_norm_stats(torch.randn(5).npu(), 1e-5)
    with pytest.raises(RuntimeError, match=r"batch_norm_elemt: expected an input of at least 2 dimensions"):
        torch.batch_norm_elemt(torch.randn(5).npu(), None, None, torch.zeros(1).npu(), torch.ones(1).npu(), 1e-5)
