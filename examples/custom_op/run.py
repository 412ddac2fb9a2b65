"""Calls the Ascend C add kernel through torch.ops: forward, backward and
torch.compile, each checked against the same math on cpu."""
import torch

import custom_ops  # noqa: F401  (registers torch.ops.custom_ops.add)

x = torch.randn(16 * 2048)
y = torch.randn(16 * 2048)
z = torch.ops.custom_ops.add(x.npu(), y.npu())
torch.testing.assert_close(z.cpu(), x + y)

xn = x.npu().requires_grad_()
(torch.ops.custom_ops.add(xn, y.npu()) * 3).sum().backward()
torch.testing.assert_close(xn.grad.cpu(), torch.full_like(x, 3.0))

compiled = torch.compile(lambda a, b: torch.ops.custom_ops.add(a.relu(), b) * 2)
torch.testing.assert_close(compiled(x.npu(), y.npu()).cpu(), (x.relu() + y) * 2)
print("custom_ops.add on npu matches cpu (forward, backward, torch.compile)")
