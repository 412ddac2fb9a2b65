"""Dynamo's view of npu: NpuInterface, defined at real torch_npu's path
(torch_npu/utils/_dynamo_device.py)."""

from torch_npu.utils._dynamo_device import NpuInterface  # noqa: F401
