"""The parameters of an nn.Module or an optimizer (FRAMEWORK/torch.param_tensor_info), keyed by the
hash of the Python call that recorded them.

Fixed part: u64 key; then the module's parameters under tag 1 or the optimizer's under tag 2, each a
text of entries separated by "}".
"""

import struct
from collections import namedtuple

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []

_FIXED = struct.Struct("<Q")
_TAG_MODULE, _TAG_OPTIMIZER = 1, 2
_SEPARATOR = "}"

ParamLists = namedtuple("ParamLists", ["module_params", "optimizer_params"])


def _split(text):
    return text.split(_SEPARATOR) if text else []


class ParamTensorBean:
    CONSTANT_STRUCT_SIZE = _FIXED.size

    def __init__(self, data: dict):
        (self._key,) = _FIXED.unpack(data.get(Constant.CONSTANT_BYTES))
        self._params = ParamLists(_split(data.get(_TAG_MODULE)), _split(data.get(_TAG_OPTIMIZER)))

    @property
    def key(self) -> int:
        return self._key

    @property
    def params(self) -> ParamLists:
        return self._params
