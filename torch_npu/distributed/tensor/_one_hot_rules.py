"""DTensor's ``one_hot`` on npu.

On npu ``one_hot`` is one operator (torch_npu/_ascend_semantics.py gives it an
npu kernel, as real torch_npu runs it as one kernel), so DTensor sees
``aten.one_hot`` itself; without a rule of its own it fell back to ATen's
composite, whose npu branch checks the class values with ``_assert_async``,
an operator DTensor has no rule for ("Operator aten._assert_async.msg does
not have a sharding strategy registered").

Each element's classes are its own, so the output, one trailing dimension
longer, is sharded wherever the input is sharded (a partial input is summed
first). With ``num_classes=-1`` the class count is the largest value of the
whole tensor, which no shard knows alone: it is reduced over the mesh first.
Because that count decides the output's shape, this is a dispatcher handler
rather than a sharding strategy (a strategy's output shape comes from running
the operator on meta tensors, which have no values).
"""

import torch
from torch._prims_common import make_contiguous_strides_for
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.placement_types import Partial, Replicate

ONE_HOT = torch.ops.aten.one_hot.default


def _one_hot_handler(op_call, args, kwargs):
    x = args[0]
    num_classes = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
    if num_classes == -1 and x.numel() > 0:
        num_classes = int(x.max().full_tensor()) + 1  # the local kernels then check their values against it
    placements = tuple(Replicate() if isinstance(p, Partial) else p for p in x.placements)
    if placements != x.placements:
        x = x.redistribute(x.device_mesh, placements)
    local = op_call(x.to_local(), num_classes)
    shape = (*x.shape, local.shape[-1])
    return DTensor.from_local(local, x.device_mesh, placements, run_check=False, shape=shape,
                              stride=make_contiguous_strides_for(shape))


DTensor._op_dispatcher._custom_op_handlers[ONE_HOT] = _one_hot_handler
