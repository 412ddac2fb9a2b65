"""torch_npu.distributed.pipelining.pipeline: torch's pipeline splitter.

``pipeline(module, mb_args, split_spec=...)`` (mode None or "export") is
torch.distributed.pipelining's: it traces the npu module with torch.export
and splits it into stages (``Pipe.build_stage(i, torch.device("npu", r))``).
``mode="fx"`` traces it with torch.fx instead, keeping the submodules named
in ``atomic_units`` as calls, for models torch.export cannot capture, as real
torch_npu's FX mode does (_fx_tracing.py).
"""

from typing import Optional

import torch
from torch.distributed.pipelining import pipeline as _torch_pipeline


def pipeline(module: torch.nn.Module, mb_args: tuple, mb_kwargs: Optional[dict] = None, split_spec=None,
             split_policy=None, mode: Optional[str] = None, atomic_units: Optional[list] = None):
    """Split ``module`` into pipeline stages (torch's pipeline, traced with torch.export)."""
    if split_spec is not None and split_policy is not None:
        raise ValueError("Cannot specify both `split_spec` and `split_policy`. Please use only one of them.")
    if mode not in (None, "export", "fx"):
        raise ValueError("`mode` must be one of None, 'export', or 'fx'.")
    if mode == "fx":
        from torch_npu.distributed.pipelining._fx_tracing import pipeline_fx
        return pipeline_fx(module, mb_args, mb_kwargs, split_spec, split_policy, atomic_units)
    if atomic_units is not None:
        raise ValueError("`atomic_units` is only supported when `mode='fx'`.")
    return _torch_pipeline(module, mb_args=mb_args, mb_kwargs=mb_kwargs, split_spec=split_spec,
                           split_policy=split_policy)


pipeline.__module__ = __name__
pipeline._torch_npu_pipelining_patch_applied = True  # as real torch_npu marks its pipeline

__all__ = ["pipeline"]
