"""torch_npu._afd: attention-FFN disaggregation's schedule context (real
torch_npu's ``torch_npu._afd``).

In disaggregated MoE inference the attention layers and the FFN (expert)
layers run on different NPUs, which hand tokens to each other through
"windows" of device memory. A schedule context (1024 bytes of device memory,
``_schedule_context.ScheduleContext``) describes one side's window to the
worker-scheduler kernels: how many sessions, micro-batches and tokens, where
the token-info flags and the token data lie, a run flag to stop them. vNPU
builds, checks and initialises it as real torch_npu does (the FFN side's
token-info flags written, the attention side's cleared, the FFN output
buffers allocated); the worker-scheduler kernels themselves
(``torch.ops.npu.*_worker_scheduler``, CANN-only in real torch_npu too)
are not provided.
"""

__all__ = ["create_schedule_context_holder"]

from ._schedule_context import ScheduleContextHolder, create_schedule_context_holder  # noqa: F401
