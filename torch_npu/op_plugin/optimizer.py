"""npu_apply_adam_w: one AdamW step in place on (var, m, v), the Ascend ApplyAdamW."""

import torch

from torch_npu.op_plugin._library import check, define


def npu_apply_adam_w(beta1_power, beta2_power, lr, weight_decay, beta1, beta2, epsilon, grad, max_grad_norm,
                     amsgrad, maximize, var, m, v):
    """beta*_power are beta**step (the bias corrections); with amsgrad,
    max_grad_norm holds the running maximum of v and is updated in place."""
    fn = "npu_apply_adam_w"
    for name, t in (("var", var), ("m", m), ("v", v)):
        check(t.shape == grad.shape, f"{fn}: {name} of shape {list(t.shape)} should have grad's shape "
              f"{list(grad.shape)}.")
    g = -grad if maximize else grad
    var.mul_(1 - float(lr) * float(weight_decay))
    m.mul_(float(beta1)).add_(g, alpha=1 - float(beta1))
    v.mul_(float(beta2)).addcmul_(g, g, value=1 - float(beta2))
    second = v
    if amsgrad:
        check(max_grad_norm is not None and max_grad_norm.shape == v.shape,
              f"{fn}: amsgrad needs max_grad_norm with v's shape {list(v.shape)}.")
        torch.maximum(max_grad_norm, v, out=max_grad_norm)
        second = max_grad_norm
    denom = (second.sqrt() / (1 - float(beta2_power)) ** 0.5).add_(float(epsilon))
    var.addcdiv_(m, denom, value=-float(lr) / (1 - float(beta1_power)))
    return var, m, v


define("npu_apply_adam_w.out(Scalar beta1_power, Scalar beta2_power, Scalar lr, Scalar weight_decay, "
       "Scalar beta1, Scalar beta2, Scalar epsilon, Tensor grad, Tensor? max_grad_norm, bool? amsgrad, "
       "bool? maximize, *, Tensor(a!) var, Tensor(b!) m, Tensor(c!) v) -> (Tensor(a!), Tensor(b!), Tensor(c!))",
       lambda *args, var, m, v: npu_apply_adam_w(*args[:9], bool(args[9]), bool(args[10]), var, m, v),
       export=False)
