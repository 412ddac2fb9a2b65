"""torch.npu.aclnn: the aclnn backend's switches, as torch.backends modules
are (``torch.npu.aclnn.allow_hf32 = False``, ``with torch.npu.aclnn.flags(...)``).

allow_hf32 is the convolutions' HF32 switch, the same setting as
torch.npu.conv.allow_hf32 (default True, as real torch_npu's): the virtual NPU
computes float32 convolutions in float32 either way and keeps the setting.
"""

import sys
import warnings
from contextlib import contextmanager

from torch.backends import ContextProp, PropModule, __allow_nonbracketed_mutation

__all__ = ["version", "allow_hf32"]


def version():
    """The aclnn library's version: CANN does not report one (None), as in real torch_npu."""
    warnings.warn("torch.npu.aclnn.version isn't implemented!")


def _get_allow_hf32():
    from torch_npu.npu.backend_config import conv
    return conv.allow_hf32


def _set_allow_hf32(enabled):
    from torch_npu.npu.backend_config import conv
    conv.allow_hf32 = bool(enabled)


def set_flags(_allow_hf32=None):
    previous = (_get_allow_hf32(),)
    if _allow_hf32 is not None:
        _set_allow_hf32(_allow_hf32)
    return previous


@contextmanager
def flags(allow_hf32=True):
    with __allow_nonbracketed_mutation():
        previous = set_flags(allow_hf32)
    try:
        yield
    finally:
        with __allow_nonbracketed_mutation():
            set_flags(*previous)


class _AclnnModule(PropModule):
    allow_hf32 = ContextProp(_get_allow_hf32, _set_allow_hf32)


sys.modules[__name__] = _AclnnModule(sys.modules[__name__], __name__)
