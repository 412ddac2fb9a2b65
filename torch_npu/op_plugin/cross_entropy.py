"""npu_cross_entropy_loss (+ its backward): the Ascend CrossEntropyLoss
kernel, log_softmax and nll_loss fused.

``log_prob = x - logsumexp(x)`` per row and the loss is torch's cross
entropy over it (class weights, ignore_index, label_smoothing, "mean" /
"sum" / "none"), computed in float32 and returned in the input's dtype.
"none" gives one loss per row (N,), the reductions a (1,) tensor. The z-loss
(``lse_square_scale_for_zloss``, ``return_zloss``) is not supported by the
kernel either ("当前暂不支持"): it is refused, and its two outputs are empty.
Only the loss is differentiable; its gradient is
npu_cross_entropy_loss_backward's, computed from the saved log_prob.
"""

import torch
import torch.nn.functional as F

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define

_REDUCTIONS = ("mean", "sum", "none")


def _check(fn, x, target, weight, reduction, label_smoothing, lse_square_scale_for_zloss):
    check(x.dim() == 2 and x.shape[1] > 0, f"{fn}: input should be 2-dimensional (N, C) with C > 0, but got "
          f"shape {list(x.shape)}.")
    check(x.dtype in (torch.float16, torch.bfloat16, torch.float32),
          f"{fn}: input should be float16, bfloat16 or float32, but got {x.dtype}.")
    check(target.dim() == 1 and target.shape[0] == x.shape[0],
          f"{fn}: target should be 1-dimensional with input's {x.shape[0]} rows, but got shape {list(target.shape)}.")
    check(target.dtype == torch.int64, f"{fn}: target should be int64, but got {target.dtype}.")
    check(weight is None or (weight.dim() == 1 and weight.shape[0] == x.shape[1]),
          f"{fn}: weight should be 1-dimensional with input's {x.shape[1]} classes, but got shape "
          f"{None if weight is None else list(weight.shape)}.")
    check(reduction in _REDUCTIONS, f"{fn}: reduction should be one of {list(_REDUCTIONS)}, but got '{reduction}'.")
    check(0.0 <= label_smoothing < 1.0, f"{fn}: label_smoothing should be in [0.0, 1.0), but got {label_smoothing}.")
    check(lse_square_scale_for_zloss == 0.0,
          f"{fn}: lse_square_scale_for_zloss (the z-loss) is not supported; pass 0.0.")


def _loss(log_prob, target, weight, reduction, ignore_index, label_smoothing):
    loss = F.cross_entropy(log_prob, target, weight=None if weight is None else weight.float(),
                           ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing)
    return loss if reduction == "none" else loss.reshape(1)


def npu_cross_entropy_loss(input, target, weight=None, reduction="mean", ignore_index=-100, label_smoothing=0.0,
                           lse_square_scale_for_zloss=0.0, return_zloss=False):
    """(loss, log_prob, zloss, lse_for_zloss): see the module docstring."""
    fn = "npu_cross_entropy_loss"
    _check(fn, input, target, weight, reduction, label_smoothing, lse_square_scale_for_zloss)
    check(not return_zloss, f"{fn}: return_zloss=True (the z-loss) is not supported; pass False.")
    log_prob = torch.log_softmax(input.float(), -1)
    # the loss differentiates through log_softmax; log_prob itself is returned without a gradient
    loss = _loss(log_prob, target, weight, reduction, ignore_index, label_smoothing)
    empty = input.new_empty((0,))
    return loss.to(input.dtype), log_prob.detach().to(input.dtype), empty, empty


def npu_cross_entropy_loss_backward(grad_loss, log_prob, target, weight=None, grad_zloss=None, lse_for_zloss=None,
                                    reduction="mean", ignore_index=-100, label_smoothing=0.0,
                                    lse_square_scale_for_zloss=0.0):
    """The gradient of the loss with respect to the input, from the saved log_prob
    (log_softmax of log_prob is log_prob itself, so the loss over it has the input's gradient)."""
    fn = "npu_cross_entropy_loss_backward"
    _check(fn, log_prob, target, weight, reduction, label_smoothing, lse_square_scale_for_zloss)
    check(grad_zloss is None or grad_zloss.numel() == 0, f"{fn}: grad_zloss (the z-loss) is not supported.")
    with torch.enable_grad():
        lp = log_prob.detach().float().requires_grad_()
        loss = _loss(lp, target, weight, reduction, ignore_index, label_smoothing)
        (grad,) = torch.autograd.grad(loss, lp, grad_loss.float().reshape(loss.shape))
    return grad.to(grad_loss.dtype)


define("npu_cross_entropy_loss(Tensor input, Tensor target, Tensor? weight=None, str reduction='mean', "
       "int ignore_index=-100, float label_smoothing=0.0, float lse_square_scale_for_zloss=0.0, "
       "bool return_zloss=False) -> (Tensor, Tensor, Tensor, Tensor)", npu_cross_entropy_loss)
define("npu_cross_entropy_loss_backward(Tensor grad_loss, Tensor log_prob, Tensor target, Tensor? weight=None, "
       "Tensor? grad_zloss=None, Tensor? lse_for_zloss=None, str reduction='mean', int ignore_index=-100, "
       "float label_smoothing=0.0, float lse_square_scale_for_zloss=0.0) -> Tensor",
       npu_cross_entropy_loss_backward)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
