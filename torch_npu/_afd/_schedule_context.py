"""The schedule context of attention-FFN disaggregation (torch_npu/_afd/__init__.py).

Its layout is the device kernels' (1024 bytes, packed): a common area, a
control area (the run flag), the attention side's area and the FFN side's.
Sizes are computed as unsigned 64-bit numbers, as the kernels read them: a
product that overflows is refused, not wrapped.
"""

import ctypes
import inspect

import torch

__all__ = ["ScheduleContextHolder"]

_SCHEDULE_FFN, _SCHEDULE_ATTENTION = 0, 1
_RUN_STOP, _RUN_RUNNING = 0, 1
_ALIGN = 512
_UINT32_MAX, _UINT64_MAX, _INT32_MAX = 2 ** 32 - 1, 2 ** 64 - 1, 2 ** 31 - 1


class _CommonArea(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("session_num", ctypes.c_uint32), ("micro_batch_num", ctypes.c_uint32),
                ("micro_batch_size", ctypes.c_uint32), ("selected_expert_num", ctypes.c_uint32),
                ("expert_num", ctypes.c_uint32), ("attn_to_ffn_token_size", ctypes.c_uint32),
                ("ffn_to_attn_token_size", ctypes.c_uint32), ("schedule_mode", ctypes.c_int32),
                ("reserve0", ctypes.c_int8 * 96)]


class _ControlArea(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("run_flag", ctypes.c_int32), ("reserve2", ctypes.c_int8 * 124)]


class _AttentionArea(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("token_info_buf", ctypes.c_uint64), ("token_info_buf_size", ctypes.c_uint64),
                ("token_data_buf", ctypes.c_uint64), ("token_data_buf_size", ctypes.c_uint64),
                ("micro_batch_id", ctypes.c_uint32), ("reserve5", ctypes.c_int8 * 92)]


class _FfnArea(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("token_info_buf", ctypes.c_uint64), ("token_info_buf_size", ctypes.c_uint64),
                ("token_data_buf", ctypes.c_uint64), ("token_data_buf_size", ctypes.c_uint64),
                ("polling_index", ctypes.c_uint64), ("reserve3", ctypes.c_int8 * 88),
                ("layer_ids_buf", ctypes.c_uint64), ("layer_ids_buf_size", ctypes.c_uint64),
                ("session_ids_buf", ctypes.c_uint64), ("session_ids_buf_size", ctypes.c_uint64),
                ("micro_batch_ids_buf", ctypes.c_uint64), ("micro_batch_ids_buf_size", ctypes.c_uint64),
                ("expert_ids_buf", ctypes.c_uint64), ("expert_ids_buf_size", ctypes.c_uint64),
                ("out_num", ctypes.c_uint32), ("reserve4", ctypes.c_int8 * 60)]


class ScheduleContext(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("common", _CommonArea), ("control", _ControlArea), ("attention", _AttentionArea),
                ("ffn", _FfnArea), ("reserve6", ctypes.c_int8 * 384)]


assert ctypes.sizeof(ScheduleContext) == 1024, "the kernels read a 1024-byte schedule context"
_RUN_FLAG_OFFSET = ScheduleContext.control.offset + _ControlArea.run_flag.offset


class _Refused(Exception):
    """A parameter the context cannot take; its message says which and why."""


def _align_up(value):
    return (value + _ALIGN - 1) // _ALIGN * _ALIGN


def _product(what, *factors):
    """The product as the kernels compute it, in unsigned 64 bits: refused when it overflows."""
    result = 1
    for factor in factors:
        result *= factor
        if result > _UINT64_MAX:
            raise _Refused(f"{what} overflows 64 bits")
    return result


class ScheduleContextHolder:
    """One side's schedule context: its parameters checked, its window
    initialised and the context copied to npu memory by ``init()``."""

    def __init__(self, schedule_mode, session_num, micro_batch_num, micro_batch_size, selected_expert_num,
                 expert_num, attn_to_ffn_token_size, ffn_to_attn_token_size, ffn_window=0, ffn_window_size=0,
                 attention_window=0, attention_window_size=0):
        counts = dict(session_num=session_num, micro_batch_num=micro_batch_num, micro_batch_size=micro_batch_size,
                      selected_expert_num=selected_expert_num, expert_num=expert_num,
                      attn_to_ffn_token_size=attn_to_ffn_token_size, ffn_to_attn_token_size=ffn_to_attn_token_size)
        windows = dict(ffn_window=ffn_window, ffn_window_size=ffn_window_size, attention_window=attention_window,
                       attention_window_size=attention_window_size)
        for name, value, top in ([("schedule_mode", schedule_mode, None)] +
                                 [(n, v, _UINT32_MAX) for n, v in counts.items()] +
                                 [(n, v, _UINT64_MAX) for n, v in windows.items()]):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"create_schedule_context_holder(): {name} must be an int, got {type(value).__name__}")
            if top is None and not -2 ** 31 <= value <= _INT32_MAX:
                raise TypeError(f"create_schedule_context_holder(): {name}={value} does not fit a 32-bit int")
            if top is not None and not 0 <= value <= top:
                raise TypeError(f"create_schedule_context_holder(): {name}={value} is not an unsigned "
                                f"{32 if top == _UINT32_MAX else 64}-bit number")
        self._context = ScheduleContext()
        self._context.common.schedule_mode = schedule_mode
        for name, value in counts.items():
            setattr(self._context.common, name, value)
        self._ffn_window, self._ffn_window_size = ffn_window, ffn_window_size
        self._attention_window, self._attention_window_size = attention_window, attention_window_size
        self._device = torch.npu.current_device()
        self._context_tensor = None
        self._workspace = None

    # --- initialisation -------------------------------------------------------

    def init(self) -> None:
        """Checks the parameters, initialises the window and puts the context in npu memory (once)."""
        if self._context_tensor is not None:
            return
        try:
            self._check()
            if self._context.common.schedule_mode == _SCHEDULE_FFN:
                self._init_ffn()
            else:
                self._init_attention()
        except _Refused as refusal:
            raise RuntimeError(f"ScheduleContextHolder init return 1: {refusal}") from None
        self._context.control.run_flag = _RUN_RUNNING
        if self._context.common.schedule_mode == _SCHEDULE_FFN:
            self._allocate_ffn_outputs()
        host = torch.frombuffer(bytearray(bytes(self._context)), dtype=torch.int8)
        self._context_tensor = host.to(f"npu:{self._device}")

    def _check(self):
        common = self._context.common
        for name in ("session_num", "micro_batch_num", "micro_batch_size", "selected_expert_num", "expert_num"):
            if getattr(common, name) == 0:
                raise _Refused(f"{name} can't be 0")
        for name in ("attn_to_ffn_token_size", "ffn_to_attn_token_size"):
            if getattr(common, name) % _ALIGN:
                raise _Refused(f"{name}={getattr(common, name)} must be a multiple of {_ALIGN}")
        if common.schedule_mode == _SCHEDULE_FFN:
            if self._ffn_window == 0 or self._ffn_window_size == 0:
                raise _Refused("schedule_mode=0 (FFN) needs ffn_window and ffn_window_size, neither 0")
        elif common.schedule_mode == _SCHEDULE_ATTENTION:
            if self._attention_window == 0 or self._attention_window_size == 0:
                raise _Refused("schedule_mode=1 (attention) needs attention_window and attention_window_size, "
                               "neither 0")
        else:
            raise _Refused(f"schedule_mode={common.schedule_mode} is not supported: 0 (FFN) or 1 (attention)")

    def _token_data_area(self, info_bytes, window, window_size, name):
        """(address, bytes) of a window's token data: what follows its token-info
        area, aligned to 512."""
        aligned = _align_up(info_bytes)
        if aligned > _UINT64_MAX:
            raise _Refused(f"the token-info size {info_bytes} overflows when aligned to {_ALIGN}")
        if window_size <= aligned:
            raise _Refused(f"the window ({window_size} bytes) must be larger than its token-info area "
                           f"({aligned} bytes)")
        if window + aligned > _UINT64_MAX:
            raise _Refused(f"{name} plus its token-info area overflows 64 bits")
        return window + aligned, window_size - aligned

    def _init_ffn(self):
        common, ffn = self._context.common, self._context.ffn
        # Per session and micro-batch: a flag, a layer id, then an expert id per token and selected expert.
        per_batch = _product("the token-info size", 4, common.selected_expert_num, common.micro_batch_size) + 8
        if per_batch > _UINT64_MAX:
            raise _Refused("the token-info size overflows 64 bits")
        info = _product("the token-info size", per_batch, common.micro_batch_num, common.session_num)
        data, data_bytes = self._token_data_area(info, self._ffn_window, self._ffn_window_size, "ffn_window")
        flags = torch.full((common.session_num * common.micro_batch_num, per_batch // 4), _INT32_MAX,
                           dtype=torch.int32)
        flags[:, :2] = 0  # no token yet, layer 0
        window = self._window(self._ffn_window, info, "ffn_window")
        window.copy_(flags.view(torch.int8).reshape(-1))
        ffn.token_info_buf, ffn.token_info_buf_size = self._ffn_window, info
        ffn.token_data_buf, ffn.token_data_buf_size = data, data_bytes
        ffn.layer_ids_buf_size = ffn.session_ids_buf_size = ffn.micro_batch_ids_buf_size = 4 * common.session_num
        ffn.expert_ids_buf_size = 4 * common.session_num * common.micro_batch_size * common.selected_expert_num

    def _init_attention(self):
        common, attention = self._context.common, self._context.attention
        info = _product("the token-info size", 4, common.selected_expert_num, common.micro_batch_size,
                        common.micro_batch_num)
        data, data_bytes = self._token_data_area(info, self._attention_window, self._attention_window_size,
                                                 "attention_window")
        self._window(self._attention_window, info, "attention_window").zero_()
        attention.token_info_buf, attention.token_info_buf_size = self._attention_window, info
        attention.token_data_buf, attention.token_data_buf_size = data, data_bytes
        # The scheduler scans from (micro_batch_id + 1) % micro_batch_num: it starts at batch 0.
        attention.micro_batch_id = common.micro_batch_num - 1

    def _window(self, address, nbytes, name):
        import torch_npu
        try:
            return torch_npu._C._npu_tensor_over_memory(address, [nbytes], torch.int8, self._device)
        except (RuntimeError, ValueError) as error:
            raise _Refused(f"{name}: {error}") from None

    def _allocate_ffn_outputs(self):
        ffn = self._context.ffn
        ids = _align_up(ffn.layer_ids_buf_size)  # the session and micro-batch id buffers are as large
        self._workspace = torch.empty(3 * ids + _align_up(ffn.expert_ids_buf_size), dtype=torch.int8,
                                      device=f"npu:{self._device}")
        base = self._workspace.data_ptr()
        ffn.layer_ids_buf, ffn.session_ids_buf = base, base + ids
        ffn.micro_batch_ids_buf, ffn.expert_ids_buf = base + 2 * ids, base + 3 * ids

    # --- use ------------------------------------------------------------------------

    def get_schedule_context_tensor(self) -> torch.Tensor:
        """The context in npu memory (int8, 1024 bytes), as the scheduler kernels take it."""
        if self._context_tensor is None:
            raise RuntimeError("get_context_tensor returned 1: the schedule context is not initialised (init())")
        return self._context_tensor

    def stop_schedule(self) -> None:
        """Sets the context's run flag to stop: the scheduler kernels return."""
        if self._context_tensor is None:
            raise RuntimeError("stop returned 1: the schedule context is not initialised (init())")
        self._context.control.run_flag = _RUN_STOP
        flag = torch.tensor([_RUN_STOP], dtype=torch.int32).view(torch.int8)
        self._context_tensor[_RUN_FLAG_OFFSET:_RUN_FLAG_OFFSET + 4].copy_(flag)

    def get_schedule_context_info(self) -> str:
        """The context as the npu holds it now, as text."""
        if self._context_tensor is None:
            return "Error: schedule context is not inited!"
        context = ScheduleContext.from_buffer_copy(self._context_tensor.cpu().numpy().tobytes())
        common, control = context.common, context.control
        text = (f"schedule context: schedule_mode={common.schedule_mode}, session_num={common.session_num}, "
                f"micro_batch_num={common.micro_batch_num}, micro_batch_size={common.micro_batch_size}, "
                f"selected_expert_num={common.selected_expert_num}, expert_num={common.expert_num}, "
                f"attn_to_ffn_token_size={common.attn_to_ffn_token_size}, "
                f"ffn_to_attn_token_size={common.ffn_to_attn_token_size}, run_flag={control.run_flag}")
        if common.schedule_mode == _SCHEDULE_FFN:
            ffn = context.ffn
            fields = ("token_info_buf", "token_info_buf_size", "token_data_buf", "token_data_buf_size",
                      "polling_index", "layer_ids_buf", "layer_ids_buf_size", "session_ids_buf",
                      "session_ids_buf_size", "micro_batch_ids_buf", "micro_batch_ids_buf_size", "expert_ids_buf",
                      "expert_ids_buf_size", "out_num")
            return text + ", ffn info: " + ", ".join(f"{f}={getattr(ffn, f)}" for f in fields) + ";"
        attention = context.attention
        fields = ("token_info_buf", "token_info_buf_size", "token_data_buf", "token_data_buf_size", "micro_batch_id")
        return text + ", attention info: " + ", ".join(f"{f}={getattr(attention, f)}" for f in fields) + ";"


def create_schedule_context_holder(*args, **kwargs) -> ScheduleContextHolder:
    """An initialised schedule context for one side of the disaggregation.

    Takes ScheduleContextHolder's parameters. schedule_mode 0 schedules the
    FFN side (``ffn_window`` and ``ffn_window_size`` needed), 1 the attention
    side (``attention_window`` and ``attention_window_size``). A window is the
    address and size of npu memory the caller owns (an npu tensor's
    ``data_ptr()``); token sizes are multiples of 512 bytes. Raises
    RuntimeError saying what is wrong.
    """
    holder = ScheduleContextHolder(*args, **kwargs)
    holder.init()
    return holder


# help() and inspect show the parameters the holder takes.
create_schedule_context_holder.__signature__ = inspect.signature(ScheduleContextHolder).replace(
    return_annotation=ScheduleContextHolder)
