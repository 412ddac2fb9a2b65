"""torchair.experimental: ``inference`` (weights in the NPU's internal formats)."""

from torch_npu.dynamo.torchair.experimental import inference

__all__ = ["inference"]
