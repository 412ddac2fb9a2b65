"""npu_top_k_top_p against the reference op-plugin's test writes (vLLM's
apply_top_k_top_p), on cpu."""
import pytest
import torch

import torch_npu


def _reference(logits, p, k):
    ordered, index = logits.sort(dim=-1, descending=False, stable=True)
    if k is not None:
        kth = ordered.gather(1, (ordered.size(1) - k.to(torch.long)).unsqueeze(1))
        ordered.masked_fill_(ordered < kth, -float("inf"))
    if p is not None:
        cumulative = ordered.to(torch.float32).softmax(dim=-1).cumsum(dim=-1)
        mask = cumulative <= 1 - p.unsqueeze(1)
        mask[:, -1] = False
        ordered.masked_fill_(mask, -float("inf"))
    return torch.empty_like(ordered).scatter_(dim=-1, index=index, src=ordered)


@pytest.mark.parametrize("use_p, use_k", [(True, True), (True, False), (False, True)])
def test_top_k_top_p_equals_the_reference(use_p, use_k):
    torch.manual_seed(0)
    logits = torch.empty(4, 1500).uniform_(-5, 5)
    logits[0, :10] = 1.0  # ties at the threshold
    p = torch.rand(4) if use_p else None
    k = torch.randint(1, 100, (4,), dtype=torch.int32) if use_k else None
    got = torch_npu.npu_top_k_top_p(logits.npu(), None if p is None else p.npu(), None if k is None else k.npu())
    want = _reference(logits.clone(), p, k)
    assert torch.equal(got.cpu(), want)
    kept = torch.isfinite(got.cpu()).sum(1)
    assert (kept >= 1).all() and (k is None or (kept <= 1500).all())


def test_bad_arguments():
    logits = torch.randn(2, 8).npu()
    with pytest.raises(RuntimeError, match="k should be a 1-D integer tensor of 2"):
        torch_npu.npu_top_k_top_p(logits, None, torch.ones(3, dtype=torch.int32).npu())
    with pytest.raises(RuntimeError, match="logits should be a 2-D floating-point"):
        torch_npu.npu_top_k_top_p(torch.ones(2, 8, dtype=torch.int32).npu(), None, None)
