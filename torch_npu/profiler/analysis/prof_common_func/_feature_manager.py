"""Which optional features of a profile's data this analysis understands.

The profiling toolchain may describe features by name: the component each
one affects, from which versions of it, and how compatible it is. A feature
counts as supported when it concerns torch_npu itself (component "PTA"),
for every version or for the one running. The decision is taken when the
descriptions are loaded; asking is a set lookup.
"""

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []

_TORCH_NPU_COMPONENT = "PTA"
_EVERY_VERSION = "all"


def _running_version() -> str:
    try:
        import torch_npu
    except ImportError:
        return ""
    return str(getattr(torch_npu, "__version__", ""))


def _applies_here(description: dict) -> bool:
    """Whether a feature's description targets torch_npu, in this version."""
    if description.get(Constant.AffectedComponent) != _TORCH_NPU_COMPONENT:
        return False
    versions = str(description.get(Constant.AffectedComponentVersion, _EVERY_VERSION))
    if versions == _EVERY_VERSION:
        return True
    return _running_version() in {version.strip() for version in versions.split(",")}


class FeatureManager:
    def __init__(self):
        self._supported = set()

    def load_feature_info(self, feature_info: dict):
        """Takes in descriptions, {name: {key: value}}; a name described again is decided again."""
        for name, description in (feature_info or {}).items():
            if isinstance(description, dict) and _applies_here(description):
                self._supported.add(name)
            else:
                self._supported.discard(name)

    def is_supported_feature(self, feature_name: str) -> bool:
        return feature_name in self._supported

    def clear(self):
        self._supported.clear()
