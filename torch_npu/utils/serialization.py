"""torch_npu.utils.serialization: load and save_async under the module name real
torch_npu defines them in. vNPU's npu tensors save and load through torch's
own serialization (their storage format tag travels in the tensor metadata),
so ``load`` is torch.load."""

import torch

from torch_npu.utils._save_async import save_async

__all__ = ["load", "save_async"]

from torch_npu._public_names import report_public_module  # noqa: E402

report_public_module(__name__)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """torch.load (npu tensors come back on npu, or where map_location says)."""
    kwargs = dict(pickle_load_args)
    if pickle_module is not None:
        kwargs["pickle_module"] = pickle_module
    return torch.load(f, map_location=map_location, weights_only=weights_only, mmap=mmap, **kwargs)
