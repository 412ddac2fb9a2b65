"""torch_npu.utils: collect_env (environment report) and flops_count (FlopsCounter)."""
