"""``torch_npu.<op>.out(..., out=[a, b])``: the out tensors of a multi-output
``.out`` overload passed as one list, as real torch_npu's bindings take them
(vllm-ascend: ``torch_npu.npu_fused_infer_attention_score.out(...,
workspace=w, out=[attn_output, softmax_lse])``).

``torch.ops.npu.<op>.out`` itself takes each out tensor by its schema name
(``attention_out=..., softmax_lse=...``), so torch_npu exports such an op as
a thin packet whose ``out`` attribute accepts either form. Everything else
(calling it, its other overloads, ``.default``) is the packet's own.
"""

import torch


def _out_argument_names(overload):
    """The names of the overload's written (``Tensor(a!)``) keyword arguments, in order."""
    return [a.name for a in overload._schema.arguments
            if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]


class OutOverload:
    """An ``.out`` OpOverload that also takes ``out=[...]`` (or a tuple)."""

    def __init__(self, overload, names):
        self._overload = overload
        self._names = names
        self.__name__ = overload.__name__
        self.__doc__ = overload.__doc__

    def __call__(self, *args, out=None, **kwargs):
        if out is not None:
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            if len(outs) != len(self._names):
                raise TypeError(f"{self._overload.name()}: out should hold {len(self._names)} tensors "
                                f"({', '.join(self._names)}), got {len(outs)}")
            clash = [name for name in self._names if name in kwargs]
            if clash:
                raise TypeError(f"{self._overload.name()}: got out= and {', '.join(clash)}= both")
            kwargs.update(zip(self._names, outs))
        return self._overload(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._overload, name)

    def __repr__(self):
        return repr(self._overload)


class OutListPacket:
    """torch.ops.npu.<op> with an ``out`` that takes ``out=[...]``."""

    def __init__(self, packet):
        self._packet = packet
        self.__name__ = packet.__name__
        self.__doc__ = packet.__doc__
        overload = packet.out
        # A plain attribute (not a property), so that mock.patch can replace it.
        self.out = OutOverload(overload, _out_argument_names(overload))

    def __call__(self, *args, **kwargs):
        return self._packet(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._packet, name)

    def __repr__(self):
        return repr(self._packet)


def with_out_list(packet):
    """``packet`` wrapped when its ``.out`` overload writes two or more tensors; else itself."""
    if not isinstance(packet, torch._ops.OpOverloadPacket) or "out" not in packet.overloads():
        return packet
    if len(_out_argument_names(packet.out)) < 2:
        return packet
    return OutListPacket(packet)
