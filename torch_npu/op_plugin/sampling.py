"""Sampling filters of LLM serving: npu_top_k_top_p (vLLM's
apply_top_k_top_p, which vllm-ascend calls through torch_npu).

Per row of ``logits`` (batch, vocab), after a stable ascending sort:
top-k keeps the values not below the k-th largest (ties at the threshold are
kept); top-p then turns the survivors into probabilities (float32 softmax)
and drops the smallest ones while their cumulative sum stays at or below
1 - p, always keeping the largest. Dropped positions become -inf; the rows
come back in their original order. ``k`` outside [1, vocab] is an indexing
error (reported at the next synchronisation, as a kernel error).
"""

import torch

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define


def npu_top_k_top_p(logits, p=None, k=None):
    fn = "npu_top_k_top_p"
    check(logits.dim() == 2 and logits.is_floating_point(),
          f"{fn}: logits should be a 2-D floating-point tensor (batch, vocab), got {logits.dtype} of shape "
          f"{list(logits.shape)}.")
    batch = logits.shape[0]
    check(p is None or (p.dim() == 1 and p.shape[0] == batch and p.is_floating_point()),
          f"{fn}: p should be a 1-D floating-point tensor of {batch} values (one per row).")
    check(k is None or (k.dim() == 1 and k.shape[0] == batch and not k.is_floating_point()),
          f"{fn}: k should be a 1-D integer tensor of {batch} values (one per row).")
    ordered, index = logits.sort(dim=-1, descending=False, stable=True)
    if k is not None:
        threshold = ordered.gather(1, (ordered.shape[1] - k.long()).unsqueeze(1))
        ordered = ordered.masked_fill(ordered < threshold, float("-inf"))
    if p is not None:
        cumulative = ordered.float().softmax(dim=-1).cumsum(dim=-1)
        drop = cumulative <= 1 - p.float().unsqueeze(1)
        drop[:, -1] = False
        ordered = ordered.masked_fill(drop, float("-inf"))
    return torch.empty_like(ordered).scatter_(-1, index, ordered)


define("npu_top_k_top_p(Tensor logits, Tensor? p=None, Tensor? k=None) -> Tensor", npu_top_k_top_p)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
