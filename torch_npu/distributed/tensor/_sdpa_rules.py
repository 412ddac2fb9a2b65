"""DTensor sharding strategies for npu's scaled-dot-product attention kernel,
``aten._scaled_dot_product_fused_attention_overrideable`` and its backward
(csrc/ops/attention.cpp), which torch registers none for: q, k and v
replicated, or sharded alike on the batch (0) or head (1) dimension, outputs
as q. Context parallelism adds the sequence dimension (2) while it is on
(experimental/_context_parallel/_attention.py)."""

import torch
from torch.distributed.tensor._op_schema import OpSchema, OpStrategy, PlacementList, RuntimeSchemaInfo
from torch.distributed.tensor._ops.utils import expand_to_full_mesh_op_strategy, register_op_strategy
from torch.distributed.tensor.placement_types import Replicate, Shard

aten = torch.ops.aten
FORWARD = aten._scaled_dot_product_fused_attention_overrideable.default
BACKWARD = aten._scaled_dot_product_fused_attention_overrideable_backward.default
FORWARD_SCHEMA_INFO = RuntimeSchemaInfo(4)
SEQ_DIM = 2
BASE_DIMS = (None, 0, 1)  # replicated, batch- or head-sharded


def _placement(dim):
    return Replicate() if dim is None else Shard(dim)


def forward_strategy(op_schema: OpSchema, dims=BASE_DIMS) -> OpStrategy:
    mesh = op_schema.get_mesh_from_args()
    has_bias = len(op_schema.args_schema) > 3 and isinstance(op_schema.args_schema[3], OpStrategy)
    strategies: list[PlacementList] = []
    # outputs: output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset, debug mask;
    # then q, k, v and the bias (sharded with them on batch and heads, else replicated).
    for dim in dims:
        p = _placement(dim)
        bias = [p if dim in (0, 1) else Replicate()] if has_bias else []
        strategies.append([p, p, None, None, None, None, None, None, None, p, p, p, *bias])
    return expand_to_full_mesh_op_strategy(mesh, op_schema, strategies, input_index=9)


def backward_strategy(op_schema: OpSchema, dims=BASE_DIMS) -> OpStrategy:
    mesh = op_schema.get_mesh_from_args(validate=False)
    tensors = [a for a in op_schema.args_schema if isinstance(a, OpStrategy)]
    has_bias = isinstance(op_schema.args_schema[4], OpStrategy)
    strategies: list[PlacementList] = []
    # outputs: grad_q, grad_k, grad_v, grad_attn_bias; tensor inputs: grad_out, q, k, v, [bias], out, logsumexp,
    # then any other tensor (seeds) replicated.
    for dim in dims:
        p = _placement(dim)
        inputs = [p, p, p, p] + ([p if dim in (0, 1) else Replicate()] if has_bias else []) + [p, p]
        inputs += [Replicate()] * (len(tensors) - len(inputs))
        strategies.append([p, p, p, None, *inputs])
    return expand_to_full_mesh_op_strategy(mesh, op_schema, strategies, input_index=4)


register_op_strategy(FORWARD, schema_info=FORWARD_SCHEMA_INFO)(forward_strategy)
register_op_strategy(BACKWARD)(backward_strategy)
