"""torch_npu._afd: attention-FFN disaggregation's schedule context (torch_npu/_afd)."""

import ctypes

import pytest
import torch

import torch_npu
from torch_npu._afd._schedule_context import ScheduleContext

PARAMS = dict(schedule_mode=0, session_num=2, micro_batch_num=3, micro_batch_size=4, selected_expert_num=5,
              expert_num=16, attn_to_ffn_token_size=1024, ffn_to_attn_token_size=512)


def _context(holder):
    tensor = holder.get_schedule_context_tensor()
    assert tensor.device.type == "npu" and tensor.dtype == torch.int8 and tensor.numel() == 1024
    return ScheduleContext.from_buffer_copy(tensor.cpu().numpy().tobytes())


def test_the_layout_is_the_kernels():
    assert ctypes.sizeof(ScheduleContext) == 1024
    assert [ScheduleContext.common.offset, ScheduleContext.control.offset, ScheduleContext.attention.offset,
            ScheduleContext.ffn.offset] == [0, 128, 256, 384]


def test_ffn_side_writes_its_token_flags_and_lays_out_its_window():
    window = torch.full((1 << 16,), 7, dtype=torch.int8, device="npu")
    holder = torch_npu._afd.create_schedule_context_holder(
        **PARAMS, ffn_window=window.data_ptr(), ffn_window_size=window.numel())
    context = _context(holder)
    per_batch = 2 + 4 * 5  # flag, layer id, one expert id per token and selected expert
    info = 4 * per_batch * 3 * 2
    assert (context.ffn.token_info_buf, context.ffn.token_info_buf_size) == (window.data_ptr(), info)
    assert info == 528  # the info area, aligned to 512: 1024 bytes
    assert context.ffn.token_data_buf == window.data_ptr() + 1024
    assert context.ffn.token_data_buf_size == window.numel() - 1024
    assert context.control.run_flag == 1 and context.common.expert_num == 16
    flags = window[:info].cpu().view(torch.int32).reshape(6, per_batch)
    assert torch.equal(flags[:, :2], torch.zeros(6, 2, dtype=torch.int32))
    assert bool((flags[:, 2:] == 2 ** 31 - 1).all())
    assert bool((window[info:].cpu() == 7).all())  # the rest of the window is the caller's
    # The output buffers: one workspace of four aligned parts.
    assert context.ffn.session_ids_buf - context.ffn.layer_ids_buf == 512
    assert context.ffn.expert_ids_buf_size == 4 * 2 * 4 * 5
    info_text = holder.get_schedule_context_info()
    assert "ffn info: token_info_buf=" in info_text and "run_flag=1" in info_text
    holder.stop_schedule()
    assert _context(holder).control.run_flag == 0 and "run_flag=0" in holder.get_schedule_context_info()


def test_attention_side_clears_its_token_info():
    window = torch.full((4096,), 3, dtype=torch.int8, device="npu")
    holder = torch_npu._afd.create_schedule_context_holder(
        **dict(PARAMS, schedule_mode=1), attention_window=window.data_ptr(), attention_window_size=4096)
    context = _context(holder)
    info = 4 * 5 * 4 * 3
    assert context.attention.token_info_buf_size == info and context.attention.micro_batch_id == 2
    assert bool((window[:info].cpu() == 0).all()) and bool((window[info:].cpu() == 3).all())
    assert "attention info:" in holder.get_schedule_context_info()


@pytest.mark.parametrize("change, message", [
    ({"session_num": 0}, "session_num can't be 0"),
    ({"attn_to_ffn_token_size": 1023}, "must be a multiple of 512"),
    ({"schedule_mode": 2}, "schedule_mode=2 is not supported"),
    ({"ffn_window_size": 511}, "must be larger than its token-info area"),
    ({"ffn_window": 0}, "needs ffn_window and ffn_window_size"),
    ({"session_num": 1 << 31, "micro_batch_num": 1 << 31}, "overflows 64 bits"),
    ({"schedule_mode": 1}, "needs attention_window"),
])
def test_bad_parameters_are_refused_with_the_reason(change, message):
    window = torch.zeros(1 << 16, dtype=torch.int8, device="npu")
    params = dict(PARAMS, ffn_window=window.data_ptr(), ffn_window_size=window.numel())
    params.update(change)
    with pytest.raises(RuntimeError, match=f"ScheduleContextHolder init return 1: .*{message}"):
        torch_npu._afd.create_schedule_context_holder(**params)


def test_a_window_that_is_not_npu_memory_is_refused_untouched():
    host = torch.full((1 << 16,), 5, dtype=torch.int8)
    with pytest.raises(RuntimeError, match="ffn_window: "):
        torch_npu._afd.create_schedule_context_holder(**PARAMS, ffn_window=host.data_ptr(),
                                                      ffn_window_size=host.numel())
    assert bool((host == 5).all())
    small = torch.zeros(256, dtype=torch.int8, device="npu")  # claims more than the allocation holds
    with pytest.raises(RuntimeError, match="ffn_window: "):
        torch_npu._afd.create_schedule_context_holder(**PARAMS, ffn_window=small.data_ptr(), ffn_window_size=1 << 16)
    with pytest.raises(TypeError, match="session_num=-1 is not an unsigned 32-bit number"):
        torch_npu._afd.create_schedule_context_holder(**dict(PARAMS, session_num=-1))


def test_public_names_and_signature():
    import inspect
    assert torch_npu._afd.__all__ == ["create_schedule_context_holder"]
    params = inspect.signature(torch_npu._afd.create_schedule_context_holder).parameters
    assert list(params)[:2] == ["schedule_mode", "session_num"] and params["ffn_window"].default == 0
    assert isinstance(torch_npu._afd.ScheduleContextHolder, type)
