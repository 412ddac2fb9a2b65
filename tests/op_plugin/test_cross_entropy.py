"""torch_npu.op_plugin.cross_entropy: npu_cross_entropy_loss and its backward against
torch.nn.functional.cross_entropy (weights, ignore_index, label smoothing, reductions,
half precision), its gradient, and bad input."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import DEVICES, rnd


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("options", [{}, {"ignore_index": 2}, {"label_smoothing": 0.1}, {"weighted": True}])
def test_cross_entropy_loss_equals_torch(device, reduction, options):
    x = rnd(9, 6, seed=1).to(device).requires_grad_()
    target = torch.tensor([0, 2, 5, 1, 2, 3, 4, 0, 2], device=device)
    weight = rnd(6, seed=2, lo=0.1, hi=1.0).to(device) if options.get("weighted") else None
    kwargs = {k: v for k, v in options.items() if k != "weighted"}
    loss, log_prob, zloss, lse = torch_npu.npu_cross_entropy_loss(x, target, weight, reduction, **kwargs)
    want = F.cross_entropy(x.detach().cpu(), target.cpu(), weight=None if weight is None else weight.cpu(),
                           reduction=reduction, **kwargs)
    assert loss.shape == ((9,) if reduction == "none" else (1,))
    assert_close(loss.detach().cpu().reshape(want.shape), want)
    assert_close(log_prob.cpu(), torch.log_softmax(x.detach().cpu(), -1))
    assert zloss.numel() == 0 and lse.numel() == 0 and not log_prob.requires_grad
    grad = torch.randn(loss.shape, generator=torch.Generator().manual_seed(3)).to(device)
    loss.backward(grad)
    ref_x = x.detach().cpu().requires_grad_()
    F.cross_entropy(ref_x, target.cpu(), weight=None if weight is None else weight.cpu(), reduction=reduction,
                    **kwargs).backward(grad.cpu().reshape(want.shape))
    assert_close(x.grad.cpu(), ref_x.grad)
    explicit = torch_npu.npu_cross_entropy_loss_backward(grad, log_prob, target, weight, reduction=reduction,
                                                         **kwargs)
    assert_close(explicit.cpu(), ref_x.grad)


def test_cross_entropy_loss_half_precision():
    x = rnd(4, 10, seed=4, dtype=torch.float16).npu()
    target = torch.tensor([1, 9, 3, 0]).npu()
    loss, log_prob, _, _ = torch_npu.npu_cross_entropy_loss(x, target)
    assert loss.dtype == log_prob.dtype == torch.float16
    assert_close(loss.cpu().float(), F.cross_entropy(x.cpu().float(), target.cpu()).reshape(1), atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("kwargs,match", [
    (dict(x=torch.zeros(4)), "input should be 2-dimensional"),
    (dict(target=torch.zeros(3, dtype=torch.int64)), "target should be 1-dimensional with input's 4 rows"),
    (dict(target=torch.zeros(4, dtype=torch.int32)), "target should be int64"),
    (dict(weight=torch.ones(5)), "weight should be 1-dimensional with input's 6 classes"),
    (dict(reduction="batchmean"), "reduction should be one of"),
    (dict(label_smoothing=1.0), "label_smoothing should be in"),
    (dict(lse_square_scale_for_zloss=0.1), "z-loss"),
    (dict(return_zloss=True), "return_zloss=True .* is not supported"),
])
def test_cross_entropy_loss_bad_input(kwargs, match):
    args = dict(x=torch.zeros(4, 6), target=torch.zeros(4, dtype=torch.int64))
    args.update(kwargs)
    x, target = args.pop("x").npu(), args.pop("target").npu()
    if "weight" in args:
        args["weight"] = args["weight"].npu()
    with pytest.raises(RuntimeError, match=match):
        torch_npu.npu_cross_entropy_loss(x, target, **args)
