"""RMS normalisation: npu_rms_norm (+ its backward) and npu_add_rms_norm;
npu_layer_norm_eval (layer norm without the saved statistics).

``rstd = rsqrt(mean(x^2 over gamma's dimensions) + epsilon)`` in float32,
with gamma's dimensions kept as size 1; ``y = x * rstd * gamma`` computed in
float32 and returned in x's dtype, as the Ascend kernel does.
"""

import torch

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define


def _check_gamma(fn, x, gamma):
    nd = gamma.dim()
    check(nd >= 1 and x.dim() >= nd and list(x.shape[x.dim() - nd:]) == list(gamma.shape),
          f"{fn}: gamma of shape {list(gamma.shape)} should match the last dimensions of x, "
          f"whose shape is {list(x.shape)}.")
    check(x.device == gamma.device, f"{fn}: gamma is on {gamma.device} but x is on {x.device}; "
          "Expected all tensors to be on the same device.")
    return tuple(range(x.dim() - nd, x.dim()))


def npu_rms_norm(x, gamma, epsilon=1e-6):
    dims = _check_gamma("npu_rms_norm", x, gamma)
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dims, keepdim=True) + epsilon)
    return (xf * rstd * gamma.float()).to(x.dtype), rstd


def npu_rms_norm_backward(dy, x, gamma, rstd):
    """(dx, dgamma) of npu_rms_norm, from its saved rstd."""
    dims = _check_gamma("npu_rms_norm_backward", x, gamma)
    xf, dyf, g = x.float(), dy.float(), gamma.float()
    xhat = xf * rstd
    dxhat = dyf * g
    n = 1
    for d in dims:
        n *= x.shape[d]
    dx = rstd * (dxhat - xhat * (dxhat * xhat).sum(dims, keepdim=True) / n)
    lead = tuple(range(x.dim() - gamma.dim()))
    dgamma = (dyf * xhat).sum(lead) if lead else dyf * xhat
    return dx.to(x.dtype), dgamma.to(gamma.dtype)


def npu_add_rms_norm(x1, x2, gamma, epsilon=1e-6):
    """(rms_norm(x1 + x2), rstd, x1 + x2)."""
    check(x1.shape == x2.shape, f"npu_add_rms_norm: x1 {list(x1.shape)} and x2 {list(x2.shape)} should have "
          "the same shape.")
    x = x1 + x2
    y, rstd = npu_rms_norm(x, gamma, epsilon)
    return y, rstd, x


def npu_layer_norm_eval(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    return torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps)


define("npu_layer_norm_eval(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
       "float eps=1e-05) -> Tensor", npu_layer_norm_eval)
define("npu_rms_norm(Tensor self, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)", npu_rms_norm)
define("npu_rms_norm_backward(Tensor dy, Tensor self, Tensor gamma, Tensor rstd) -> (Tensor, Tensor)",
       npu_rms_norm_backward)
define("npu_add_rms_norm(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor, Tensor)",
       npu_add_rms_norm)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
