"""DataLoader with worker processes and pin_memory, feeding npu."""

import torch
from torch.utils.data import DataLoader, TensorDataset

import torch_npu  # noqa: F401


def test_dataloader_workers_and_pinned_batches():
    torch.zeros(1, device="npu")  # the device is initialised before workers fork
    data = TensorDataset(torch.randn(256, 8), torch.randint(0, 3, (256,)))
    loader = DataLoader(data, batch_size=32, num_workers=2, pin_memory=True)
    total = torch.zeros((), device="npu")
    for x, _ in loader:
        assert x.is_pinned()
        total += x.to("npu", non_blocking=True).sum()
    torch.testing.assert_close(total.cpu(), data.tensors[0].sum(), atol=1e-4, rtol=1e-5)
