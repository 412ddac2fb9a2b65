"""Sharding rules for npu_fusion_attention and its gradient on DTensors.

An attention is independent across the batch and across heads, so besides
running replicated it can be sharded by batch (data parallel) or by head
(tensor parallel: each rank attends over its own heads, `head_num` divided
by the shards). The sequence and head-size dimensions mix inside a softmax
and a dot product: inputs sharded there are gathered first. Sharding is
offered only where the local computation is the global one cut into
pieces: no pse, no padding mask, no prefix or variable sequence lengths,
and no dropout (each rank would draw its own mask).

softmax_max and softmax_sum are laid out (B, N, Sq, 8) (TND: (T, N, 8)),
so they follow the batch on dimension 0 and the heads on dimension 1.
"""

from torch.distributed.tensor import Replicate, Shard

from torch_npu.distributed.tensor._sharding import Candidate, sharding_rule


def _mask_placement(atten_mask, sparse_mode, dim_of_mask):
    """The atten_mask's placement when the inputs are sharded on batch (mask dim 0) or heads (mask dim 1):
    a 4-d mask with that dimension > 1 is sharded with them, a broadcast or compressed one is replicated."""
    if atten_mask is None:
        return None
    if sparse_mode in (0, 1) and atten_mask.dim() == 4 and atten_mask.shape[dim_of_mask] != 1:
        return Shard(dim_of_mask)
    return Replicate()


def _shardable(args):
    unused = ("pse", "padding_mask", "prefix", "actual_seq_qlen", "actual_seq_kvlen", "sink", "query_rope",
              "key_rope", "dropout_mask", "q_start_idx", "kv_start_idx")
    return all(args.get(name) is None for name in unused) and args["keep_prob"] >= 1.0


def _candidates(args, tensors, tensor_outputs, stat_names):
    """Candidates for the forward (stat outputs) or gradient (stat inputs).

    tensors: the names of the q/k/v-like arguments sharded together.
    tensor_outputs: each output's kind: "qkv" (sharded with the inputs),
    "stat" (in the softmax layout), "rep" (replicated) or None (not a
    tensor). stat_names: stat arguments that follow the softmax layout
    (B, N, S, 8)."""
    layout = args["input_layout"]
    replicated = Candidate(inputs={}, outputs=[None if kind is None else Replicate() for kind in tensor_outputs])
    candidates = [replicated]
    if not _shardable(args):
        return candidates

    def sharded(layout_dim, stat_dim, mask_dim, kind):
        inputs = {name: Shard(layout_dim) for name in tensors}
        inputs.update({name: Shard(stat_dim) for name in stat_names if args.get(name) is not None})
        mask = _mask_placement(args["atten_mask"], args["sparse_mode"], mask_dim)
        if mask is not None:
            inputs["atten_mask"] = mask
        placement_of = {"qkv": Shard(layout_dim), "stat": Shard(stat_dim), "rep": Replicate(), None: None}
        return Candidate(inputs=inputs, outputs=[placement_of[k] for k in tensor_outputs], kind=kind)

    if "B" in layout:
        candidates.append(sharded(layout.index("B"), 0, 0, "dp"))
    heads = args["head_num"]
    if "N" in layout:
        candidates.append(sharded(layout.index("N"), 1, 1, "tp"))
    elif layout in ("BSH", "SBH") and heads > 0:
        # H is N * D: sharding it evenly by heads keeps each head whole (checked in the rewrite).
        candidates.append(sharded(2, 1, 1, "tp"))
    return candidates


def _divide_heads(args, shards):
    n = shards("tp")
    if n > 1:
        heads = args["head_num"]
        if heads % n:
            raise RuntimeError(
                f"npu_fusion_attention on DTensors sharded by head: head_num {heads} is not divisible by the "
                f"{n} shards of the head dimension; shard by batch or replicate instead.")
        args = dict(args, head_num=heads // n)
    return args


@sharding_rule("npu_fusion_attention", rewrite=_divide_heads)
def _fusion_attention(args):
    # (attention_out, softmax_max, softmax_sum, softmax_out, seed, offset, numels)
    return _candidates(args, ("query", "key", "value"), ("qkv", "stat", "stat", "rep", None, None, None), ())


@sharding_rule("npu_fusion_attention_grad", rewrite=_divide_heads)
def _fusion_attention_grad(args):
    # (dq, dk, dv, dpse)
    return _candidates(args, ("query", "key", "value", "dy", "attention_in"), ("qkv", "qkv", "qkv", "rep"),
                       ("softmax_max", "softmax_sum"))


@sharding_rule("npu_fusion_attention_v2", rewrite=_divide_heads)
def _fusion_attention_v2(args):
    # v1's outputs; its rope inputs and start indices keep it replicated (_shardable)
    return _candidates(args, ("query", "key", "value"), ("qkv", "stat", "stat", "rep", None, None, None), ())


@sharding_rule("npu_fusion_attention_v3", rewrite=_divide_heads)
def _fusion_attention_v3(args):
    # (attention_out, softmax_max, softmax_sum, softmax_out, seed, offset): seed and offset are tensors
    return _candidates(args, ("query", "key", "value"), ("qkv", "stat", "stat", "rep", "rep", "rep"), ())


@sharding_rule("npu_fusion_attention_grad_v3", rewrite=_divide_heads)
def _fusion_attention_grad_v3(args):
    # (dq, dk, dv, dpse, dsink)
    return _candidates(args, ("query", "key", "value", "dy", "attention_in"),
                       ("qkv", "qkv", "qkv", "rep", "rep"), ("softmax_max", "softmax_sum"))
