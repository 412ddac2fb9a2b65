"""Sharding rules for npu grouped matmuls, the communication-fused matmuls
(mc2) and npu_bmmV2 on DTensors.

A matmul y = x @ w shards three ways, as DTensor's own mm does: by x's
rows (y's rows follow, w replicated), by w's columns (y's columns follow,
bias sharded with them), or by the contracted dimension (y partial, which
is only right without a bias: each rank would add it once). A grouped
matmul applies the same choice to every group. Partial operands stay
partial where the product is linear in them.

The mc2 operators communicate themselves over the group named by `hcom`:
npu_all_gather_base_mm gathers x1's rows (so x1 must be sharded by rows and
the product's rows are whole), npu_mm_reduce_scatter_base sums the partial
products over the contracted dimension and scatters the rows.
"""

from torch.distributed.tensor import Partial, Replicate, Shard

from torch_npu.distributed.tensor._sharding import Candidate, sharding_rule


def _count(value):
    return len(value) if isinstance(value, (list, tuple)) else 0


@sharding_rule("npu_grouped_matmul", "npu_grouped_matmul.List")
def _grouped_matmul(args):
    x, weight = args["x"], args["weight"]
    has_bias = _count(args["bias"]) > 0
    quantised = any(_count(args[name]) for name in ("scale", "offset", "antiquant_scale", "antiquant_offset",
                                                     "per_token_scale", "activation_input",
                                                     "activation_quant_scale", "activation_quant_offset"))
    candidates = [Candidate(inputs={}, outputs=[Replicate()])]
    if quantised or args.get("group_type") == 2:  # K split: groups are ranges of the contracted dimension
        return candidates
    if not has_bias:
        # linear in w and in x: partial operands give a partial product
        candidates.append(Candidate(inputs={"weight": Partial()}, outputs=[Partial()]))
        candidates.append(Candidate(inputs={"x": Partial()}, outputs=[Partial()]))
    per_group_outputs = args["split_item"] in (0, 1, None)
    grouped_rows = args["group_list"] is not None or len(x) != len(weight)
    if not grouped_rows and per_group_outputs:
        # one x per weight: shard each x by any row dimension
        for d in range(x[0].dim() - 1):
            candidates.append(Candidate(inputs={"x": Shard(d)}, outputs=[Shard(d)]))
    # by w's columns (n), the bias with them ((n,) or (E, n)); y is sharded on its last dimension
    candidates.append(Candidate(inputs={"weight": Shard(-1), "bias": Shard(-1)}, outputs=[Shard(-1)]))
    if not has_bias:
        # by the contracted dimension k
        candidates.append(Candidate(inputs={"x": Shard(-1), "weight": Shard(-2)}, outputs=[Partial()]))
    return candidates


@sharding_rule("npu_grouped_matmul_add_")
def _grouped_matmul_add(args):
    # y[g] += x[g]^T @ w[g] with the groups along k: y's columns follow w's
    return [Candidate(inputs={}, outputs=[None]),
            Candidate(inputs={"self": Shard(1), "weight": Shard(1)}, outputs=[None])]


@sharding_rule("npu_bmmV2")
def _bmm(args):
    return [
        Candidate(inputs={}, outputs=[Replicate()]),
        Candidate(inputs={"self": Shard(0), "mat2": Shard(0)}, outputs=[Shard(0)]),   # batch
        Candidate(inputs={"self": Shard(1)}, outputs=[Shard(1)]),                     # rows
        Candidate(inputs={"mat2": Shard(2)}, outputs=[Shard(2)]),                     # columns
        Candidate(inputs={"self": Shard(2), "mat2": Shard(1)}, outputs=[Partial()]),  # contracted
    ]


@sharding_rule("npu_all_gather_base_mm")
def _all_gather_base_mm(args):
    # (output, gather_out): the operator gathers x1's rows over hcom itself
    if args["gather_index"] != 0:
        return [Candidate(inputs={"self": Shard(0)}, outputs=[Replicate(), Replicate()])]
    return [
        Candidate(inputs={"self": Shard(0), "x1_scale": Shard(0)}, outputs=[Replicate(), Replicate()]),
        Candidate(inputs={"self": Shard(0), "x2": Shard(1), "bias": Shard(0), "x1_scale": Shard(0),
                          "x2_scale": Shard(1)}, outputs=[Shard(1), Replicate()]),
    ]


@sharding_rule("npu_mm_reduce_scatter_base")
def _mm_reduce_scatter_base(args):
    # the operator sums the partial products over hcom and keeps its rows
    return [Candidate(inputs={"self": Shard(1), "x2": Shard(0), "bias": Shard(0), "x1_scale": Shard(1),
                              "x2_scale": Shard(0)}, outputs=[Shard(0)])]
