"""Real torch_npu's module for Dynamo's device glue: registers npu's
DeviceInterface (torch_npu/utils/_dynamo_device.py) with Dynamo, as the
first torch.compile does (torch_npu/_inductor/__init__.py registers it with
Inductor's npu backend)."""

__all__ = []


def _dynamo_register_interface_for_device():
    from torch_npu._inductor import codegen_classes
    codegen_classes()  # registers the interface, the backend and the op overrides once
