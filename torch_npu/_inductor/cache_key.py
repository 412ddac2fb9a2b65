"""The system part of Inductor's cache keys on an npu machine.

Inductor keys its caches (FX graph cache, compiled kernels) by the machine:
``CacheBase.get_system()`` names the CUDA or ROCm device and toolkit, and on
a machine without them names nothing, so artifacts compiled for another
device or toolkit would be taken as valid. As real torch_npu does, an npu
machine names its device (``torch.npu.get_device_properties().name``) and
its CANN version (``torch.version.cann``) there, and its cache directory
follows them. The key also names vNPU's own part of the compilation (a hash
of torch_npu/_inductor's sources, as Inductor's torch_key hashes torch's):
which lowerings an npu graph keeps and the code its wrapper writes are
decided there, so a cache written by another version of it is not taken as
valid. Installed when torch_npu._inductor loads (the Inductor setup at the
first compilation, torch_npu/utils/_dynamo.py), before Inductor's caches are used.
"""

import functools
import hashlib
import pathlib

import torch


@functools.cache
def _own_code_key():
    digest = hashlib.sha256()
    for source in sorted(pathlib.Path(__file__).parent.glob("*.py")):
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


def _npu_system(codecache):
    if not torch.npu.is_available():
        return None
    device = {"name": torch.npu.get_device_properties(torch.npu.current_device()).name}
    version = {"triton": codecache.triton_key(), "cann": torch.version.cann,
               "torch_npu_inductor": _own_code_key()}
    return {"device": device, "version": version,
            "hash": codecache.SYSTEM_CACHE_KEY_STRATEGY.key_from_json({"device": device, "version": version})}


def name_npu_in_cache_keys(codecache):
    original = codecache.CacheBase.get_system
    if getattr(original, "_npu", False):
        return

    @functools.cache
    def get_system():
        system = original()
        if system.get("device"):  # a CUDA or ROCm machine: torch's own answer
            return system
        return _npu_system(codecache) or system

    get_system._npu = True
    codecache.CacheBase.get_system = staticmethod(get_system)
