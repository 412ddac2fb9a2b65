"""Matrix products and convolutions: npu_linear, npu_bmmV2, npu_conv2d,
npu_conv3d, npu_convolution, npu_conv_transpose2d, npu_convolution_transpose.

Ascend kept these apart from ATen's so that the Cube unit's fractal layouts
and output-size hints could be passed in; here each is the ATen operator, and
autograd gives the backward the real ops register separately.
"""

import torch
import torch.nn.functional as F

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define


def npu_linear(x, weight, bias=None):
    return F.linear(x, weight, bias)


def npu_bmmV2(x, mat2, output_sizes):
    """Batched matmul with broadcasting; output_sizes (a shape hint for the
    Ascend kernel) is ignored when empty and must match otherwise."""
    out = torch.matmul(x, mat2)
    check(len(output_sizes) == 0 or list(output_sizes) == list(out.shape),
          f"npu_bmmV2: output_sizes {list(output_sizes)} does not match the product's shape {list(out.shape)}.")
    return out


def _convolution(fn, x, weight, bias, stride, padding, dilation, groups):
    spatial = x.dim() - 2
    check(spatial in (1, 2, 3) and weight.dim() == x.dim(),
          f"{fn}: input and weight should both be 3-, 4- or 5-dimensional, got {x.dim()} and {weight.dim()}.")
    conv = (F.conv1d, F.conv2d, F.conv3d)[spatial - 1]
    return conv(x, weight, bias, stride, padding, dilation, groups)


def npu_conv2d(x, weight, bias, stride, padding, dilation, groups):
    check(x.dim() == 4, f"npu_conv2d: input should be NCHW, got {x.dim()} dimensions.")
    return _convolution("npu_conv2d", x, weight, bias, stride, padding, dilation, groups)


def npu_conv3d(x, weight, bias, stride, padding, dilation, groups):
    check(x.dim() == 5, f"npu_conv3d: input should be NCDHW, got {x.dim()} dimensions.")
    return _convolution("npu_conv3d", x, weight, bias, stride, padding, dilation, groups)


def npu_convolution(x, weight, bias, stride, padding, dilation, groups):
    return _convolution("npu_convolution", x, weight, bias, stride, padding, dilation, groups)


def _transposed(fn, x, weight, bias, padding, output_padding, stride, dilation, groups):
    spatial = x.dim() - 2
    check(spatial in (1, 2, 3) and weight.dim() == x.dim(),
          f"{fn}: input and weight should both be 3-, 4- or 5-dimensional, got {x.dim()} and {weight.dim()}.")
    conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[spatial - 1]
    return conv(x, weight, bias, stride, padding, output_padding, groups, dilation)


def npu_conv_transpose2d(x, weight, bias, padding, output_padding, stride, dilation, groups):
    check(x.dim() == 4, f"npu_conv_transpose2d: input should be NCHW, got {x.dim()} dimensions.")
    return _transposed("npu_conv_transpose2d", x, weight, bias, padding, output_padding, stride, dilation, groups)


def npu_convolution_transpose(x, weight, bias, padding, output_padding, stride, dilation, groups):
    return _transposed("npu_convolution_transpose", x, weight, bias, padding, output_padding, stride, dilation,
                       groups)


define("npu_linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", npu_linear)
define("npu_bmmV2(Tensor self, Tensor mat2, int[] output_sizes) -> Tensor", npu_bmmV2)
define("npu_conv2d(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, "
       "int groups) -> Tensor", npu_conv2d)
define("npu_conv3d(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, "
       "int groups) -> Tensor", npu_conv3d)
define("npu_convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, "
       "int groups) -> Tensor", npu_convolution)
define("npu_conv_transpose2d(Tensor input, Tensor weight, Tensor? bias, int[] padding, int[] output_padding, "
       "int[] stride, int[] dilation, int groups) -> Tensor", npu_conv_transpose2d)
define("npu_convolution_transpose(Tensor input, Tensor weight, Tensor? bias, int[] padding, int[] output_padding, "
       "int[] stride, int[] dilation, int groups) -> Tensor", npu_convolution_transpose)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
