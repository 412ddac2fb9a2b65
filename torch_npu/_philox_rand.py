"""``torch.ops.rngprims.philox_rand`` on npu: the counter-based random
operator that AOTAutograd's RNG functionalisation and Inductor use
(``torch._functorch.config.functionalize_rng_ops``), which torch implements
for CUDA only.

Its contract: the numbers are a function of (seed, offset) alone, and it
returns how far it moved the offset. vNPU's generator is counter-based like
CUDA's (its state is the seed and the offset, 8 bytes each), so the kernel
sets a forked generator to (seed, offset), draws ``torch.rand`` there (the
numbers an eager ``torch.rand`` draws from that state) and returns the
distance its offset moved. The device's own generator is left as it was.
"""

import torch

__all__ = ["register"]


def _philox_rand_npu(size, seed, offset, stride, device=None, dtype=None):
    if stride is not None:
        raise ValueError(f"rngprims.philox_rand: stride must be None, got {stride}")
    device = torch.device(device if device is not None else "npu")
    start = int(offset.reshape(()).item())
    state = torch.tensor([int(seed.reshape(()).item()), start], dtype=torch.int64).view(torch.uint8)
    with torch.random.fork_rng(devices=[device], device_type="npu"):
        torch.npu.set_rng_state(state, device)
        values = torch.rand(size, device=device, dtype=dtype)
        moved = int(torch.npu.get_rng_state(device).view(torch.int64)[1]) - start
    return values, torch.tensor(moved, dtype=torch.int64)


def register():
    torch.library.register_kernel("rngprims::philox_rand", "npu", _philox_rand_npu)
