"""The parameters of an nn.Module or an optimizer (FRAMEWORK/torch.param_tensor_info), keyed by the
hash (u64) of the Python call that recorded them; the module's parameters come under tag 1, the
optimizer's under tag 2, each a text of entries separated by "}"."""

from collections import namedtuple

from torch_npu.profiler.analysis.prof_bean._bean_fields import PackedRecord, entry

__all__ = []

_TAG_MODULE, _TAG_OPTIMIZER = 1, 2

ParamLists = namedtuple("ParamLists", ["module_params", "optimizer_params"])


def _entries(text):
    return text.split("}") if text else []


class ParamTensorBean(PackedRecord):
    LAYOUT = "<Q"
    FIELDS = ("key",)

    key = entry("key")
    params = entry("params", doc="ParamLists: the module's and the optimizer's entries")

    def __init__(self, data: dict):
        self._unpack_tagged(data)["params"] = ParamLists(_entries(data.get(_TAG_MODULE)),
                                                           _entries(data.get(_TAG_OPTIMIZER)))
