"""NPU random number generation state (torch.npu.manual_seed, get_rng_state, ...)."""

import torch

from torch_npu import _C
from torch_npu.npu.device import _index, _lazy_init, device_count

# Real torch_npu's: the names this module defines (device_count is the device module's).
__all__ = ["get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all", "manual_seed",
           "manual_seed_all", "seed", "seed_all", "initial_seed"]


def _generator(device=None) -> torch.Generator:
    _lazy_init()
    return _C._default_generator(_index(device))


_generators_once_initialized = None  # the tuple, kept once the device count is fixed


def _all_generators():
    # One torch.Generator per visible device, counted now: until the first
    # device use the count follows ASCEND_RT_VISIBLE_DEVICES, which a script
    # may set after `import torch_npu`. From then on the same tuple of the
    # same objects, as torch.cuda.default_generators is.
    global _generators_once_initialized
    if _generators_once_initialized is not None:
        return _generators_once_initialized
    generators = tuple(_C._default_generator(i) for i in range(device_count()))
    if _C._is_initialized():
        _generators_once_initialized = generators
    return generators


def __getattr__(name):
    # torch.npu.default_generators, as real torch_npu's (a tuple per device).
    if name == "default_generators":
        return _all_generators()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def manual_seed(seed) -> None:
    """Seeds the current device's generator."""
    _generator().manual_seed(int(seed))


def manual_seed_all(seed) -> None:
    for gen in _all_generators():
        gen.manual_seed(int(seed))


def seed() -> None:
    _generator().seed()


def seed_all() -> None:
    value = _generator().seed()
    for gen in _all_generators():
        gen.manual_seed(value)


def initial_seed() -> int:
    return _generator().initial_seed()


def _state_generator(device) -> torch.Generator:
    # As torch_npu (and torch.cuda): only the device's index counts, whatever
    # its type. Megatron calls torch.cuda.random.get_rng_state(device="cuda"),
    # which transfer_to_npu turns into this function with a "cuda" device.
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        device = -1 if device.index is None else device.index
    return _generator(device)


def _get_generator(device: torch.device) -> torch.Generator:
    """The default generator of an npu device (torch.cuda's name: AOTAutograd's
    graph-safe RNG asks the device module for it, torch_npu/utils/_dynamo.py)."""
    return _state_generator(device)


def get_rng_state(device="npu") -> torch.Tensor:
    return _state_generator(device).get_state()


def set_rng_state(new_state, device="npu") -> None:
    _state_generator(device).set_state(new_state)


def _get_rng_state_offset(device="npu") -> int:
    """The default generator's offset into its random stream (Philox's, as
    torch.cuda._get_rng_state_offset); only the device's index counts."""
    return _state_generator(device).get_offset()


def _set_rng_state_offset(offset: int, device="npu") -> None:
    """Moves the default generator to ``offset`` in its random stream."""
    _state_generator(device).set_offset(offset)


def get_rng_state_all():
    return [gen.get_state() for gen in _all_generators()]


def set_rng_state_all(new_states) -> None:
    for gen, state in zip(_all_generators(), new_states):
        gen.set_state(state)
