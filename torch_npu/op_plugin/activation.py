"""Activations and layout helpers: npu_swiglu (+ backward), npu_geglu (+ grad),
npu_fast_gelu / fast_gelu (+ backward), npu_gelu, npu_silu (+ in place),
npu_mish (+ backward), npu_softmax_cross_entropy_with_logits,
npu_masked_softmax_with_rel_pos_bias, npu_confusion_transpose."""

import math

import torch
import torch.nn.functional as F

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define, define_mutating


def _halves(fn, x, dim):
    check(-x.dim() <= dim < x.dim(), f"{fn}: dim {dim} is out of range for a {x.dim()}-dimensional input.")
    check(x.shape[dim] % 2 == 0, f"{fn}: the size of dimension {dim} ({x.shape[dim]}) should be even.")
    return x.chunk(2, dim=dim)


def npu_swiglu(x, dim=-1):
    """silu(a) * b, with a and b the two halves of x along dim."""
    a, b = _halves("npu_swiglu", x, dim)
    return F.silu(a) * b


def npu_swiglu_backward(grad_output, x, dim=-1):
    a, b = _halves("npu_swiglu_backward", x, dim)
    sig = torch.sigmoid(a)
    da = grad_output * b * sig * (1 + a * (1 - sig))
    return torch.cat((da, grad_output * a * sig), dim=dim)


def npu_geglu(x, dim=-1, approximate=1, activate_left=False):
    """(y, gelu): the activated half is the right one unless activate_left;
    approximate 1 is gelu's tanh form, 0 the exact one."""
    check(approximate in (0, 1), f"npu_geglu: approximate should be 0 (none) or 1 (tanh), but got {approximate}.")
    left, right = _halves("npu_geglu", x, dim)
    gate, value = (left, right) if activate_left else (right, left)
    gelu = F.gelu(gate, approximate="tanh" if approximate == 1 else "none")
    return value * gelu, gelu


def _gelu_derivative(x, approximate):
    if approximate == 1:  # d/dx of 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
        k = math.sqrt(2 / math.pi)
        t = torch.tanh(k * (x + 0.044715 * x ** 3))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)
    cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2)))
    return cdf + x * torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def npu_geglu_grad(grad_output, x, gelu, dim=-1, approximate=1, activate_left=False):
    """d npu_geglu(x)[0] / dx applied to grad_output; gelu is the forward's
    second output (the activated half)."""
    check(approximate in (0, 1), f"npu_geglu_grad: approximate should be 0 (none) or 1 (tanh), but got {approximate}.")
    left, right = _halves("npu_geglu_grad", x, dim)
    gate, value = (left, right) if activate_left else (right, left)
    g, xf = grad_output.float(), gate.float()
    d_value = (g * gelu.float()).to(x.dtype)
    d_gate = (g * value.float() * _gelu_derivative(xf, approximate)).to(x.dtype)
    return torch.cat((d_gate, d_value) if activate_left else (d_value, d_gate), dim=dim)


def npu_fast_gelu(x):
    """x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|)), the Ascend FastGelu."""
    ax = x.abs()
    return x / (1 + torch.exp(-1.702 * ax)) * torch.exp(0.851 * (x - ax))


def npu_fast_gelu_backward(grad, x):
    """grad * d/dx fast_gelu(x); fast_gelu(x) is x * sigmoid(1.702 x) written
    without overflow, so its derivative is s + 1.702 x s (1 - s)."""
    s = torch.sigmoid(1.702 * x)
    return grad * (s + 1.702 * x * s * (1 - s))


def npu_mish(x):
    return F.mish(x)


def npu_mish_backward(grad, x):
    sp = F.softplus(x)
    tsp = torch.tanh(sp)
    return grad * (tsp + x * torch.sigmoid(x) * (1 - tsp * tsp))


def npu_silu_(x):
    return F.silu(x, inplace=True)


def npu_softmax_cross_entropy_with_logits(logits, labels):
    """(N,) sum over classes (dimension 1) of -labels * log_softmax(logits)."""
    check(logits.dim() == 2 and logits.shape == labels.shape,
          f"npu_softmax_cross_entropy_with_logits: logits and labels should be (N, C) of the same shape, "
          f"got {list(logits.shape)} and {list(labels.shape)}.")
    return -(labels * F.log_softmax(logits, dim=1)).sum(dim=1)


def npu_masked_softmax_with_rel_pos_bias(x, atten_mask, relative_pos_bias, scale_value=1.0,
                                         inner_precision_mode=0):
    """softmax(scale_value * x + atten_mask + relative_pos_bias) over the last
    dimension (Swin attention), the addends broadcast to x's shape."""
    check(x.dim() in (4, 5), f"npu_masked_softmax_with_rel_pos_bias: x should be 4- or 5-dimensional, "
          f"got {x.dim()} dimensions.")
    y = x * scale_value if scale_value != 1.0 else x
    if atten_mask is not None:
        y = y + atten_mask
    return torch.softmax(y + relative_pos_bias, dim=-1)


def npu_gelu(x, approximate="none"):
    check(approximate in ("none", "tanh"), f"npu_gelu: approximate should be 'none' or 'tanh', got '{approximate}'.")
    return F.gelu(x, approximate=approximate)


def npu_confusion_transpose(x, perm, shape, transpose_first):
    """permute then reshape (transpose_first), or reshape then permute."""
    check(len(perm) == (x.dim() if transpose_first else len(shape)),
          f"npu_confusion_transpose: perm {list(perm)} does not match the tensor it permutes.")
    if transpose_first:
        return x.permute(perm).reshape(shape)
    return x.reshape(shape).permute(perm).contiguous()


define("npu_swiglu(Tensor self, int dim=-1) -> Tensor", npu_swiglu)
define("npu_swiglu_backward(Tensor grad_output, Tensor self, int dim=-1) -> Tensor", npu_swiglu_backward)
define("npu_geglu(Tensor self, int dim=-1, int approximate=1, bool activate_left=False) -> (Tensor, Tensor)",
       npu_geglu)
define("npu_geglu_grad(Tensor grad_output, Tensor self, Tensor gelu, int dim=-1, int approximate=1, "
       "bool activate_left=False) -> Tensor", npu_geglu_grad)
define("npu_masked_softmax_with_rel_pos_bias(Tensor x, Tensor? atten_mask, Tensor relative_pos_bias, "
       "float scale_value=1.0, int inner_precision_mode=0) -> Tensor", npu_masked_softmax_with_rel_pos_bias)
define("npu_fast_gelu(Tensor self) -> Tensor", npu_fast_gelu)
define("fast_gelu(Tensor input) -> Tensor", npu_fast_gelu)  # torch_npu.fast_gelu(input=x)
define("npu_fast_gelu_backward(Tensor grad, Tensor self) -> Tensor", npu_fast_gelu_backward)
define("npu_mish(Tensor self) -> Tensor", npu_mish)
define("npu_mish_backward(Tensor grad, Tensor input) -> Tensor", npu_mish_backward)
define("npu_softmax_cross_entropy_with_logits(Tensor self, Tensor labels) -> Tensor",
       npu_softmax_cross_entropy_with_logits)
define("npu_gelu(Tensor self, *, str approximate=\"none\") -> Tensor", npu_gelu)
define_mutating("npu_silu(Tensor self) -> Tensor", F.silu, "npu_silu_(Tensor(a!) self) -> Tensor(a!)", npu_silu_)


def _silu_setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], output)


def _silu_backward(ctx, grad):
    # op-plugin's derivatives.yaml: self: npu_silu_backward(grad, self, result)
    x, result = ctx.saved_tensors
    return torch.ops.npu.npu_silu_backward(grad, x, result)


torch.library.register_autograd("npu::npu_silu", _silu_backward, setup_context=_silu_setup_context)
define("npu_confusion_transpose(Tensor self, int[] perm, int[] shape, bool transpose_first) -> Tensor",
       npu_confusion_transpose)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
