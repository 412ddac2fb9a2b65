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

from ._schedule_context import ScheduleContextHolder, _create_schedule_context_holder


def create_schedule_context_holder(
        schedule_mode: int,
        session_num: int,
        micro_batch_num: int,
        micro_batch_size: int,
        selected_expert_num: int,
        expert_num: int,
        attn_to_ffn_token_size: int,
        ffn_to_attn_token_size: int,
        ffn_window: int = 0,
        ffn_window_size: int = 0,
        attention_window: int = 0,
        attention_window_size: int = 0,
) -> ScheduleContextHolder:
    """An initialised schedule context for one side of the disaggregation.

    schedule_mode: 0 schedules the FFN side (``ffn_window`` and
    ``ffn_window_size`` needed), 1 the attention side (``attention_window``
    and ``attention_window_size``). A window is the address and size of npu
    memory the caller owns (an npu tensor's ``data_ptr()``). Token sizes are
    multiples of 512 bytes. Raises RuntimeError saying what is wrong.
    """
    return _create_schedule_context_holder(
        schedule_mode, session_num, micro_batch_num, micro_batch_size, selected_expert_num, expert_num,
        attn_to_ffn_token_size, ffn_to_attn_token_size, ffn_window, ffn_window_size, attention_window,
        attention_window_size)
