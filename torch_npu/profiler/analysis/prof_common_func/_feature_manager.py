"""Which optional features of a profile's data this analysis understands.

A feature list (from the profiling toolchain) describes each feature by name:
the component it affects, from which version, and how compatible it is. The
analysis treats a feature as supported when it concerns torch_npu itself
(component "PTA") for every version or for this one.
"""

from torch_npu.profiler.analysis.prof_common_func._constant import Constant

__all__ = []

_THIS_COMPONENT = "PTA"
_ANY_VERSION = "all"


def _torch_npu_version() -> str:
    try:
        import torch_npu
        return str(getattr(torch_npu, "__version__", ""))
    except ImportError:
        return ""


class FeatureManager:
    def __init__(self):
        self._features = {}

    def load_feature_info(self, feature_info: dict):
        """Adds (or replaces) the descriptions in ``feature_info``: {name: {key: value}}."""
        for name, description in (feature_info or {}).items():
            if isinstance(description, dict):
                self._features[name] = dict(description)

    def is_supported_feature(self, feature_name: str) -> bool:
        description = self._features.get(feature_name)
        if description is None:
            return False
        if description.get(Constant.AffectedComponent) != _THIS_COMPONENT:
            return False
        versions = str(description.get(Constant.AffectedComponentVersion, _ANY_VERSION))
        if versions == _ANY_VERSION:
            return True
        return _torch_npu_version() in [v.strip() for v in versions.split(",")]

    def clear(self):
        self._features.clear()
