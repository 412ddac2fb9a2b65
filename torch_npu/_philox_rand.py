"""RNG functionalisation on npu: ``torch.ops.rngprims.philox_rand`` and
the RNG state AOTAutograd threads through a graph
(``torch._functorch.config.functionalize_rng_ops``), which torch implements
for CUDA only.

The operator's contract: the numbers are a function of (seed, offset)
alone, and it returns how far it moved the offset. vNPU's generator is
counter-based like CUDA's (its state is the seed and the offset, 8 bytes
each), so the kernel sets a forked generator to (seed, offset), draws
``torch.rand`` there (the numbers an eager ``torch.rand`` draws from that
state) and returns the distance its offset moved. The device's own
generator is left as it was. A functionalised graph passes the seed and
offset as CPU scalars (AOTAutograd makes them with ``torch.tensor``), so the
CPU kernel hands a call for an npu device to the npu one; for any other
device it stays torch's.

AOTAutograd decomposes ``rand`` and ``rand_like`` into ``philox_rand``
(``torch._decomp.decompositions_for_rng``) for CUDA alone and refuses any
other device; on npu they decompose the same way.

AOTAutograd reads and advances the generator through
``torch._prims_common.CUDARngStateHelper``, which asks CUDA. On a machine
without CUDA its three functions use the npu's current device instead
(``initial_seed``, ``_get_rng_state_offset``, ``_set_rng_state_offset``), as
they would CUDA's; with CUDA present they stay torch's.
"""

import contextlib

import torch

__all__ = ["register", "teach_aot_autograd_npu_rng_state", "teach_rng_decompositions_npu"]


def _state(seed, offset):
    """The npu generator's state for (seed, offset): two int64s as 16 bytes."""
    return torch.tensor([seed, offset], dtype=torch.int64).view(torch.uint8)


def _philox_rand_npu(size, seed, offset, stride, device=None, dtype=None):
    if stride is not None:
        raise ValueError(f"rngprims.philox_rand: stride must be None, got {stride}")
    device = torch.device(device if device is not None else "npu")
    start = int(offset.reshape(()).item())
    state = _state(int(seed.reshape(()).item()), start)
    with torch.random.fork_rng(devices=[device], device_type="npu"):
        torch.npu.set_rng_state(state, device)
        values = torch.rand(size, device=device, dtype=dtype)
        moved = int(torch.npu.get_rng_state(device).view(torch.int64)[1]) - start
    return values, torch.tensor(moved, dtype=torch.int64)


def register():
    torch.library.register_kernel("rngprims::philox_rand", "npu", _philox_rand_npu)
    torch_kernel = torch.ops.rngprims.philox_rand.default.impl_aten

    def philox_rand_cpu(size, seed, offset, stride, device=None, dtype=None):
        if device is not None and torch.device(device).type == "npu":
            return _philox_rand_npu(size, seed, offset, stride, device, dtype)
        return torch_kernel(size, seed, offset, stride, device, dtype)

    torch.library.register_kernel("rngprims::philox_rand", "cpu", philox_rand_cpu)


def _npu_instead_of_cuda():
    return not torch.cuda.is_available() and torch.npu.is_available()


def teach_aot_autograd_npu_rng_state(prims_common):
    helper = prims_common.CUDARngStateHelper
    if getattr(helper, "_npu", False):
        return
    cuda_state, cuda_offset = helper.get_torch_state_as_tuple, helper.set_new_offset
    cuda_set_state = helper.set_torch_state_tensor

    def get_torch_state_as_tuple(fake_mode=contextlib.nullcontext()):
        if not _npu_instead_of_cuda():
            return cuda_state(fake_mode)
        with fake_mode:
            return (torch.tensor(torch.npu.initial_seed()), torch.tensor(torch.npu._get_rng_state_offset()))

    def set_torch_state_tensor(seed, offset):
        if not _npu_instead_of_cuda():
            return cuda_set_state(seed, offset)
        torch.npu.set_rng_state(_state(int(seed.reshape(()).item()), int(offset.reshape(()).item())))

    def set_new_offset(relative_offset):
        if not _npu_instead_of_cuda():
            return cuda_offset(relative_offset)
        torch.npu._set_rng_state_offset(relative_offset.item())

    helper.get_torch_state_as_tuple = staticmethod(get_torch_state_as_tuple)
    helper.set_torch_state_tensor = staticmethod(set_torch_state_tensor)
    helper.set_new_offset = staticmethod(set_new_offset)
    helper._npu = True


def teach_rng_decompositions_npu(module):
    torch_rand, torch_rand_like = module.rand, module.rand_like
    if getattr(torch_rand, "_npu", False):
        return

    def functionalized_rand(shape, dtype, device):
        seed, offset = module.PhiloxStateTracker.get_state_as_tuple()
        values, jump = torch.ops.rngprims.philox_rand(shape, seed, offset, None, device, dtype)
        module.PhiloxStateTracker.advance_offset(jump)
        return values

    def rand(shape, dtype=None, layout=torch.strided, device=None, pin_memory=False):
        if device is None or torch.device(device).type != "npu":
            return torch_rand(shape, dtype, layout, device, pin_memory)
        return functionalized_rand(shape, dtype or torch.float32, torch.device(device))

    def rand_like(x, dtype=None, layout=None, device=None, pin_memory=False, memory_format=torch.preserve_format):
        if torch.device(device or x.device).type != "npu":
            return torch_rand_like(x, dtype, layout, device, pin_memory, memory_format)
        return functionalized_rand(x.shape, dtype or x.dtype, torch.device(device or x.device))

    rand._npu = rand_like._npu = True
    replacements = {torch_rand: rand, torch_rand_like: rand_like}
    for op, decomposition in list(module.rng_decompositions.items()):
        if decomposition in replacements:
            module.rng_decompositions[op] = replacements[decomposition]
    module.rand, module.rand_like = rand, rand_like
