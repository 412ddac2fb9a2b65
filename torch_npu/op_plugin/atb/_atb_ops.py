"""ATB extension operators: ``torch_npu._npu_matmul_add_fp32``.

Real torch_npu registers these when ``_register_atb_extensions()`` is called
(vllm-ascend does at worker start-up). vNPU defines them at import; the
function is kept so that callers work, and it makes sure they are defined.
"""

import torch

from torch_npu.op_plugin._library import check, define


def _npu_matmul_add_fp32(x, weight, c):
    """c += x^T @ weight in float32, in place (MindSpeed's gradient accumulation:
    main_grad += input^T @ grad_output)."""
    fn = "_npu_matmul_add_fp32"
    check(x.dim() == 2 and weight.dim() == 2 and x.shape[0] == weight.shape[0],
          f"{fn}: x {list(x.shape)} and weight {list(weight.shape)} should be 2-D with the same first dimension.")
    check(list(c.shape) == [x.shape[1], weight.shape[1]] and c.dtype == torch.float32,
          f"{fn}: c should be float32 of shape {[x.shape[1], weight.shape[1]]}, got {c.dtype} {list(c.shape)}.")
    c.add_(x.float().t() @ weight.float())


define("_npu_matmul_add_fp32(Tensor x, Tensor weight, Tensor(a!) c) -> ()", _npu_matmul_add_fp32)


def _register_atb_extensions():
    """The ATB operators are defined when torch_npu is imported; nothing more to do."""
    return None
