"""The built-in handlers: fused infer attention v1 and v2 (a functional
call is captured as its .out overload into outputs allocated first, so an
update can rewrite the same tensors), paged attention and MLA (updated in
their context lengths)."""

from .npugraph_handler import NpuGraphOpHandler, register_npu_graph_handler

__all__ = []


class _OutListHandler(NpuGraphOpHandler):
    """Operators whose .out takes its outputs as ``out=[...]``: the caller gets that list."""

    @classmethod
    def postprocess_result(cls, result, kwargs):
        return kwargs["out"] if "out" in kwargs else result


def _seq_specs(names, first, second, slots=(5, 6)):
    return {name: [("arg", slots[0], first), ("arg", slots[1], second)] for name in names}


_FIA_V1 = ["npu_fused_infer_attention_score", "npu_fused_infer_attention_score.default",
           "npu_fused_infer_attention_score.out"]
_FIA_V2 = ["npu_fused_infer_attention_score_v2", "npu_fused_infer_attention_score_v2.default",
           "npu_fused_infer_attention_score_v2.out"]


class _FiaOutHandler(_OutListHandler):
    """A functional infer-attention call is captured as its .out overload,
    into a workspace and outputs allocated first by the operator's own
    queries; an .out call passes through. Subclasses name the operator and
    the keyword arguments its output query takes."""

    _OP = ""
    _OUTPUT_KWARGS = ()

    @classmethod
    def prepare_capture(cls, func, args, kwargs):
        import torch_npu
        if func.__name__.endswith(".out"):
            return func, args, kwargs
        kwargs = dict(kwargs)
        workspace = getattr(torch_npu, f"_{cls._OP}_get_max_workspace")(*args, **kwargs)
        out = getattr(torch_npu, f"_{cls._OP}_infer_output")(
            args[0], args[2], **{k: kwargs[k] for k in cls._OUTPUT_KWARGS if k in kwargs})
        kwargs["workspace"] = workspace
        kwargs["out"] = list(out)
        return getattr(torch_npu, cls._OP).out, args, kwargs


@register_npu_graph_handler(_FIA_V1)
class _IFAv1DefaultHandler(_FiaOutHandler):
    UPDATE_SPECS = _seq_specs(_FIA_V1, "actual_seq_lengths", "actual_seq_lengths_kv")
    _OP = "npu_fused_infer_attention_score"
    _OUTPUT_KWARGS = ("input_layout", "quant_scale2", "block_table", "num_heads", "num_key_value_heads",
                      "softmax_lse_flag", "query_rope")


@register_npu_graph_handler(_FIA_V2)
class _IFAv2DefaultHandler(_FiaOutHandler):
    UPDATE_SPECS = _seq_specs(_FIA_V2, "actual_seq_qlen", "actual_seq_kvlen", slots=(7, 8))
    _OP = "npu_fused_infer_attention_score_v2"
    _OUTPUT_KWARGS = ("query_dtype", "value_dtype", "input_layout", "quant_scale_out", "block_table",
                      "num_query_heads", "num_key_value_heads", "return_softmax_lse", "query_rope", "out_dtype")


@register_npu_graph_handler(["_npu_paged_attention", "_npu_paged_attention.default",
                             "npu_multi_head_latent_attention.out"])
class _SimpleGraphHandler(NpuGraphOpHandler):
    UPDATE_SPECS = {
        "_npu_paged_attention": [("arg", 7, "context_lens")],
        "_npu_paged_attention.default": [("arg", 7, "context_lens")],
        "npu_multi_head_latent_attention.out": [("arg", 5, "context_lens")],
    }
