"""torchair.ops: operators torchair adds for graphs (and eager code) on npu.

- Tagged events: ``npu_create_tagged_event(tag)`` makes a ``torch.npu.Event``
  known by its tag; ``npu_tagged_event_record(event)`` /
  ``npu_tagged_event_wait(event)`` record it on, and make wait for it, the
  current stream. As in real torchair they are the side-effecting operators
  ``torch.ops.air.tagged_event_record(tag)`` / ``tagged_event_wait(tag)``,
  so a compiled graph keeps them in order and runs them as eager does.
- ``npu_record_tagged_stream(tensor, tag)``: ``tensor.record_stream`` on the
  stream of that tag (made at first use; "default" is the device's default
  stream), so the caching allocator keeps the memory until that stream's
  work is done.
- ``record()`` / ``wait(tensors)``: ordering points GE uses across its
  streams; vNPU runs a graph's operators in order on the current stream, so
  the order they ask for holds already (``record`` returns an empty tensor,
  ``wait`` checks its arguments and returns).
- ``npu_fused_infer_attention_score`` (``_v2``): torch_npu's operators.
- ``npu_print(*args)``: prints its tensors and strings when it runs.
"""

import threading

import torch
from torch.fx.node import has_side_effect

__all__ = ["npu_fused_infer_attention_score", "npu_fused_infer_attention_score_v2", "npu_print",
           "npu_create_tagged_event", "npu_tagged_event_record", "npu_tagged_event_wait",
           "npu_record_tagged_stream", "record", "wait"]

_LOCK = threading.Lock()
_TAG_TO_EVENT = {}
_TAG_TO_STREAM = {}


def _event_of(tag):
    event = _TAG_TO_EVENT.get(tag)
    if event is None:
        raise AssertionError(f"tagged event is None while tag is {tag}: create it with "
                             "torchair.ops.npu_create_tagged_event(tag) first")
    return event


def _stream_of(tag):
    if tag == "default":
        return torch.npu.default_stream()
    with _LOCK:
        if tag not in _TAG_TO_STREAM:
            _TAG_TO_STREAM[tag] = torch.npu.Stream()
        return _TAG_TO_STREAM[tag]


_LIBRARIES = []


def _define_ops():
    ops = torch.ops.air
    if hasattr(ops, "tagged_event_record"):
        return
    lib = torch.library.Library("air", "FRAGMENT")
    _LIBRARIES.append(lib)  # a Library unregisters its operators when collected
    lib.define("tagged_event_record(str tag, bool created_inside=False) -> ()")
    lib.define("tagged_event_wait(str tag, bool created_inside=False) -> ()")
    lib.define("record_tagged_stream(Tensor input, str tag) -> ()")
    lib.define("record(*, Device? device=None) -> Tensor")
    lib.define("wait(Tensor[] x) -> ()")

    def event_record(tag, created_inside=False):
        _event_of(tag).record(torch.npu.current_stream())

    def event_wait(tag, created_inside=False):
        _event_of(tag).wait(torch.npu.current_stream())

    def record_tagged_stream(input, tag):
        input.record_stream(_stream_of(tag))

    def nothing(*args, **kwargs):
        return None

    for name, kernel in (("tagged_event_record", event_record), ("tagged_event_wait", event_wait),
                         ("record_tagged_stream", record_tagged_stream)):
        lib.impl(name, kernel, "CompositeExplicitAutograd")
        lib.impl(name, nothing, "Meta")
        has_side_effect(getattr(ops, name).default)
    lib.impl("record", lambda *, device=None: torch.empty(0, device=device), "BackendSelect")
    lib.impl("record", lambda *, device=None: torch.empty(0, device="meta"), "Meta")
    lib.impl("wait", nothing, "BackendSelect")
    lib.impl("wait", nothing, "Meta")
    has_side_effect(ops.wait.default)


_define_ops()


def npu_fused_infer_attention_score(*args, **kwargs):
    import torch_npu
    return torch_npu.npu_fused_infer_attention_score(*args, **kwargs)


def npu_fused_infer_attention_score_v2(*args, **kwargs):
    import torch_npu
    return torch_npu.npu_fused_infer_attention_score_v2(*args, **kwargs)


def npu_print(*args, summarize_size=3, tensor_detail=False):
    """Prints strings and tensors (with dtype and shape when tensor_detail),
    the first and last ``summarize_size`` elements of each (all when -1)."""
    if not isinstance(summarize_size, int) or summarize_size == 0 or summarize_size < -1:
        raise ValueError(f"npu_print: summarize_size must be -1 or a positive int, got {summarize_size!r}")
    parts = []
    for arg in args:
        if isinstance(arg, torch.Tensor):
            flat = arg.detach().reshape(-1).cpu()
            if summarize_size != -1 and flat.numel() > 2 * summarize_size:
                values = (" ".join(str(v) for v in flat[:summarize_size].tolist()) + " ... " +
                          " ".join(str(v) for v in flat[-summarize_size:].tolist()))
            else:
                values = " ".join(str(v) for v in flat.tolist())
            detail = f"(dtype: {arg.dtype}, shape: {list(arg.shape)}) " if tensor_detail else ""
            parts.append(f"{detail}[{values}]")
        elif isinstance(arg, str):
            parts.append(arg)
        else:
            raise ValueError(f"npu_print: arguments must be tensors or strings, got {type(arg).__name__}")
    print(" ".join(parts))


def npu_create_tagged_event(tag: str):
    if not isinstance(tag, str):
        raise TypeError(f"npu_create_tagged_event: tag must be a str, got {type(tag).__name__}")
    with _LOCK:
        if tag in _TAG_TO_EVENT:
            raise ValueError(f"tagged event tag {tag} is already in use")
        event = torch.npu.Event()
        _TAG_TO_EVENT[tag] = event
        return event


def _tag_of(event):
    for tag, known in _TAG_TO_EVENT.items():
        if known is event:
            return tag
    raise ValueError(f"tagged event {event} is not in use")


def npu_tagged_event_record(event):
    return torch.ops.air.tagged_event_record(_tag_of(event))


def npu_tagged_event_wait(event):
    return torch.ops.air.tagged_event_wait(_tag_of(event))


def npu_record_tagged_stream(input: torch.Tensor, tagged_stream: str):
    return torch.ops.air.record_tagged_stream(input, tagged_stream)


def wait(tensors):
    if not tensors:
        raise ValueError("torchair.ops.wait() requires at least one tensor input")
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        raise ValueError("arguments of torchair.ops.wait() must be torch.Tensor")
    return torch.ops.air.wait(list(tensors))


def record():
    return torch.ops.air.record()
