"""ATen operators whose behaviour on a real Ascend NPU differs from ATen's
own, reproduced on npu (on other devices ATen's kernels run unchanged).

- ``one_hot``: torch_npu's kernel also takes int32 indices (ATen accepts only
  int64: "one_hot is only applicable to index tensor of type LongTensor.");
  the result has the indices' dtype (op-plugin allocates it with the input's
  options), with ATen's checks and messages otherwise.
- ``multilabel_margin_loss``: torch_npu's kernel (aclnnMultilabelMarginLoss)
  also takes int32 targets (ATen: "expected scalar type Long but found Int");
  they are widened to int64 before ATen's kernels, so autograd's backward
  sees the same target.
"""

import torch

from torch_npu import _C

_LIB = torch.library.Library("aten", "IMPL")


def _one_hot(self, num_classes=-1):
    if self.dtype not in (torch.int64, torch.int32):
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if self.numel() == 0:
        if num_classes <= 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        return torch.empty((*self.shape, num_classes), dtype=self.dtype, device=self.device)
    low, high = torch.aminmax(self)
    if int(low) < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = int(high) + 1
    elif int(high) >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = torch.zeros((*self.shape, num_classes), dtype=self.dtype, device=self.device)
    return out.scatter_(-1, self.long().unsqueeze(-1), 1)


_LIB.impl("one_hot", _one_hot, "PrivateUse1")
_C._note_op_route("aten::one_hot", "ascend_semantics")


def _multilabel_margin_loss(self, target, reduction=1):
    if target.dtype == torch.int32:
        target = target.long()
    return torch.ops.aten.multilabel_margin_loss_forward(self, target, reduction)[0]


# An Autograd-key kernel: the op is a CompositeImplicitAutograd one, and the
# forward it calls records autograd as usual (a PrivateUse1 kernel would hide
# the op's CompositeImplicitAutograd kernel from autograd on npu).
_LIB.impl("multilabel_margin_loss", _multilabel_margin_loss, "AutogradPrivateUse1")
_C._note_op_route("aten::multilabel_margin_loss", "ascend_semantics")
