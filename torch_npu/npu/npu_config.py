"""torch_npu.npu.npu_config: the configuration functions of torch.npu under the
module name real torch_npu defines them in (code imports them from here)."""

__all__ = ["set_option", "set_aoe", "set_compile_mode", "set_mm_bmm_format_nd", "get_mm_bmm_format_nd",
           "is_jit_compile_false", "finalize_dump", "init_dump", "set_dump", "set_device_limit", "get_device_limit",
           "set_stream_limit", "reset_stream_limit", "get_stream_limit"]


def __getattr__(name):
    if name in __all__:
        import torch_npu.npu
        return getattr(torch_npu.npu, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
