"""memory_timeline.json / .html: the device's memory over time by category (parameters, inputs,
activations, gradients, ...), by PyTorch's own memory profiler (torch.profiler._memory_profiler)
run over the profile's event tree instead of a live profiler result."""

import os
from dataclasses import dataclass

import torch
from torch.profiler import _memory_profiler as _torch_mp
from torch.profiler._memory_profiler import _CATEGORY_TO_COLORS, _CATEGORY_TO_INDEX, Action, Category  # noqa: F401

from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.profiler.analysis.prof_common_func._file_manager import FileManager
from torch_npu.profiler.analysis.prof_parse._event_tree_parser import EventTree, _DeviceType
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []


@dataclass(frozen=True)
class DeviceKey:
    device_type: int
    device_index: int

    def torch_device(self) -> torch.device:
        if self.device_type == _DeviceType.NPU:
            return torch.device("npu", max(self.device_index, 0))
        kind = "cuda" if self.device_type == _DeviceType.CUDA else "cpu"
        return torch.device(kind) if self.device_index < 0 else torch.device(kind, self.device_index)


@dataclass(frozen=True)
class Storage:
    ptr: int
    allocation_id: int


@dataclass(frozen=True)
class TensorKey(DeviceKey):
    """A tensor's key with its device spelled as (type, index), as the profile records it."""
    id: int
    storage: object

    @classmethod
    def from_tensor(cls, tensor):
        """The key of a _TensorMetadata (see _event_tree_parser), None without storage."""
        if tensor is None or not getattr(tensor, "storage_data_ptr", 0):
            return None
        return cls(_DeviceType.NPU, tensor.device_index, tensor.impl_ptr,
                   Storage(tensor.storage_data_ptr, tensor.allocation_id or 0))

    def to_torch(self) -> _torch_mp.TensorKey:
        return _torch_mp.TensorKey(self.torch_device(), self.id,
                                   _torch_mp._Storage(self.storage.ptr, self.storage.allocation_id))


class _ProfileResult:
    """What torch's MemoryProfile asks of a profiler result: the event tree."""

    def __init__(self, root_nodes):
        self._root_nodes = root_nodes

    def experimental_event_tree(self):
        return self._root_nodes


class MemoryProfile(_torch_mp.MemoryProfile):
    """torch's MemoryProfile over the event tree of a profile folder."""

    def __init__(self, profiler_path: str):
        tree = EventTree(profiler_path)
        self._root_nodes = tree.get_root_nodes()
        super().__init__(_ProfileResult(self._root_nodes))


class _CategoryView:
    """Answers torch's category lookups (by torch keys) from the profile's categories."""

    def __init__(self, categories, keys: dict):
        self._categories, self._keys = categories, keys

    def get(self, key, version):
        return self._categories.get(self._keys.get(key, key), version)


class MemoryProfileTimeline(_torch_mp.MemoryProfileTimeline):
    def __init__(self, memory_profile):
        self.memory_profile = memory_profile  # read at use: the profile may still be filled

    @staticmethod
    def _parse_device_info(device_str: str) -> DeviceKey:
        kind, _, index = device_str.partition(":")
        device_type = {"cpu": _DeviceType.CPU, "cuda": _DeviceType.CUDA}.get(kind, _DeviceType.NPU)
        return DeviceKey(device_type, int(index) if index else -1)

    def _get_category_index(self, key, version) -> int:
        return _CATEGORY_TO_INDEX[self.memory_profile._categories.get(key, version)]

    def _construct_timeline(self, device_str: str):
        """(times in us, sizes by category) of one device, by torch's _coalesce_timeline."""
        device = self._parse_device_info(device_str).torch_device()
        keys, timeline = {}, []
        for time_ns, action, (key, version), size in self.memory_profile.timeline:
            if isinstance(key, TensorKey):
                torch_key = key.to_torch()
                keys[torch_key] = key
                key = torch_key
            timeline.append((time_ns, action, (key, version), size))
        self.timeline = timeline
        self.categories = _CategoryView(self.memory_profile._categories, keys)
        return self._coalesce_timeline(str(device))

    def export_memory_timeline_json(self, path: str, device_str: str):
        times, sizes = self._construct_timeline(device_str)
        FileManager.create_json_file_by_path(os.path.abspath(path), [times, sizes])

    def export_memory_timeline_html(self, path: str, device_str: str, figsize=(20, 12), title=None):
        self._construct_timeline(device_str)
        super().export_memory_timeline_html(path, str(self._parse_device_info(device_str).torch_device()),
                                            figsize, title)


class MemoryTimelineParser(BaseParser):
    def __init__(self, name: str, param_dict: dict):
        super().__init__(name, param_dict)
        self._device = param_dict.get("device", "npu:0")
        self._output_file = param_dict.get("export_path") or os.path.join(self._output_path or "",
                                                                           "memory_timeline.json")

    def run(self, deps_data: dict):
        try:
            timeline = MemoryProfileTimeline(MemoryProfile(self._profiler_path))
            if self._output_file.endswith(".html"):
                timeline.export_memory_timeline_html(self._output_file, self._device)
            else:
                timeline.export_memory_timeline_json(self._output_file, self._device)
        except Exception as err:
            self.logger.error("Failed to export the memory timeline: %s", err)
            return Constant.FAIL, None
        return Constant.SUCCESS, None
