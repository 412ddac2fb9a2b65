"""In-place optimizer steps on (var, m, v): npu_apply_adam_w (the Ascend
ApplyAdamW) and npu_bert_apply_adam (the Ascend ApplyAdamV2 / BertAdam step).
Both take the three state tensors through out=(var, m, v); torch_npu's Python
wrappers unpack that tuple (torch_npu/op_plugin/__init__.py)."""

import torch

from torch_npu._public_names import defined_in
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


def _apply_adam_w_out(*args, var, m, v):
    # The schema's amsgrad and maximize are optional bools.
    return npu_apply_adam_w(*args[:9], bool(args[9]), bool(args[10]), var, m, v)


define("npu_apply_adam_w.out(Scalar beta1_power, Scalar beta2_power, Scalar lr, Scalar weight_decay, "
       "Scalar beta1, Scalar beta2, Scalar epsilon, Tensor grad, Tensor? max_grad_norm, bool? amsgrad, "
       "bool? maximize, *, Tensor(a!) var, Tensor(b!) m, Tensor(c!) v) -> (Tensor(a!), Tensor(b!), Tensor(c!))",
       _apply_adam_w_out, export=False)


def npu_bert_apply_adam(lr, beta1, beta2, epsilon, grad, max_grad_norm, global_grad_norm, weight_decay,
                        step_size=None, adam_mode=0, *, var, m, v):
    """BertAdam (no bias correction): clip g by max_grad_norm / global_grad_norm
    when max_grad_norm > 0 and global_grad_norm exceeds it; m, v as Adam;
    update = m / (sqrt(v) + eps) (adam_mode 0, "adam") or m / sqrt(v + eps)
    (adam_mode 1, "mbert_adam"), plus weight_decay * var; var -= step * update
    with step = step_size if given, else lr. See docs/fused_ops.md."""
    fn = "npu_bert_apply_adam"
    check(adam_mode in (0, 1), f"{fn}: adam_mode should be 0 (adam) or 1 (mbert_adam), got {adam_mode}.")
    check(var.dtype in (torch.float16, torch.float32),
          f"{fn}: var should be float16 or float32, got {var.dtype}.")
    for name, t in (("var", var), ("m", m), ("v", v)):
        check(t.shape == grad.shape, f"{fn}: {name} of shape {list(t.shape)} should have grad's shape "
              f"{list(grad.shape)}.")
    max_norm, global_norm = float(max_grad_norm), float(global_grad_norm)
    g = grad.to(var.dtype)
    if max_norm > 0 and global_norm > max_norm:
        g = g * (max_norm / global_norm)
    m.mul_(float(beta1)).add_(g, alpha=1 - float(beta1))
    v.mul_(float(beta2)).addcmul_(g, g, value=1 - float(beta2))
    eps = float(epsilon)
    denom = v.sqrt().add_(eps) if adam_mode == 0 else v.add(eps).sqrt_()
    update = (m / denom).add_(var, alpha=float(weight_decay))
    step = float(lr) if step_size is None else float(step_size)
    var.sub_(update, alpha=step)
    return var, m, v


def _bert_apply_adam_functional(lr, beta1, beta2, epsilon, grad, max_grad_norm, global_grad_norm, weight_decay,
                                step_size=None, adam_mode=0):
    # torch_npu's functional overload has no state to update and fails the same way.
    raise RuntimeError("npu_bert_apply_adam is not implemented for Tensor: it updates var, m and v in place; "
                       "call it with out=(var, m, v).")


define("npu_bert_apply_adam(Scalar lr, Scalar beta1, Scalar beta2, Scalar epsilon, Tensor grad, "
       "Scalar max_grad_norm, Scalar global_grad_norm, Scalar weight_decay, Scalar? step_size=None, "
       "int adam_mode=0) -> (Tensor var, Tensor m, Tensor v)", _bert_apply_adam_functional, export=False)
define("npu_bert_apply_adam.out(Scalar lr, Scalar beta1, Scalar beta2, Scalar epsilon, Tensor grad, "
       "Scalar max_grad_norm, Scalar global_grad_norm, Scalar weight_decay, Scalar? step_size=None, "
       "int adam_mode=0, *, Tensor(a!) var, Tensor(b!) m, Tensor(c!) v) -> (Tensor(a!), Tensor(b!), Tensor(c!))",
       npu_bert_apply_adam, export=False)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
