"""torch_npu.npu.amp.sharded_grad_scaler: real torch_npu's gradient scaler
for sharded training (FSDP, with or without parameters offloaded to the
CPU), ``_ShardedGradScaler``, also exported as ``torch_npu._ShardedGradScaler``.

It is torch's own ``torch.distributed.fsdp.sharded_grad_scaler.
ShardedGradScaler`` on the npu by default: torch's handles the privateuse1
device already (unscaling per device, CPU-offloaded gradients, the found-inf
flags all-reduced over ``process_group`` so that every rank skips the same
steps), so vNPU only changes the default device, as real torch_npu's does.
"""

from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

__all__ = []


class _ShardedGradScaler(ShardedGradScaler):
    """torch's ShardedGradScaler with ``device="npu"`` by default."""

    def __init__(self, device="npu", init_scale=2.0 ** 16, backoff_factor=0.5, growth_factor=2.0,
                 growth_interval=2000, enabled=True, process_group=None):
        # process_group None: the default group, as for torch's all_reduce.
        super().__init__(device=device, init_scale=init_scale, backoff_factor=backoff_factor,
                         growth_factor=growth_factor, growth_interval=growth_interval, enabled=enabled,
                         process_group=process_group)


def _replace_torchs():
    """As real torch_npu does, torch's FSDP module hands out this scaler too
    (``torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler``). Done
    whenever torch's module is imported, before or after torch_npu
    (torch_npu/__init__.py), and by this module's own import."""
    from torch.distributed.fsdp import sharded_grad_scaler
    sharded_grad_scaler.ShardedGradScaler = _ShardedGradScaler


_replace_torchs()
