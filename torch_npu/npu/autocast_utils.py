"""torch_npu.npu.autocast_utils: torch.npu's autocast queries under the module
name real torch_npu defines them in."""

__all__ = ["get_amp_supported_dtype", "is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype",
           "set_autocast_dtype"]


def __getattr__(name):
    if name in __all__:
        import torch_npu.npu
        return getattr(torch_npu.npu, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
