"""``a @ b.transpose(-2, -1)`` (attention scores q k^T) as one autograd Function.

Real torch_npu gives it a hand-written backward on the device's batched
matmul (npu_bmmV2) without materialising the transpose; the gradients are
those of the plain expression: da = g @ b, db = g^T @ a.
"""

import torch

import torch_npu

__all__ = ["MatmulApply", "matmul_transpose"]


class MatmulApply(torch.autograd.Function):
    """forward(a, b) = a @ b^T over the last two dims (batch dims broadcast)."""

    @staticmethod
    def forward(ctx, self, mat2):
        ctx.save_for_backward(self, mat2)
        return torch.matmul(self, mat2.transpose(-2, -1))

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad_a = torch_npu.npu_bmmV2(grad, b, [])
        grad_b = torch_npu.npu_bmmV2(grad.transpose(-2, -1), a, [])
        # Broadcast batch dims: sum the gradient back to each input's shape.
        return _sum_to(grad_a, a.shape), _sum_to(grad_b, b.shape)


def _sum_to(grad, shape):
    return grad if grad.shape == shape else grad.sum_to_size(shape)


matmul_transpose = MatmulApply.apply
