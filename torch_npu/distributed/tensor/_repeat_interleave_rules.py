"""DTensor sharding of ``repeat_interleave`` with an int count, and of its
gradient ``npu::repeat_interleave_backward_int``, as real torch_npu shards them.

On npu the operator is recorded whole by autograd, with that gradient
operator (csrc/ops/repeat_interleave.cpp), so DTensor sees the two operators
themselves rather than the views ATen's composite is made of:

- repeating along ``dim`` leaves every other dimension as it is, so the
  input sharded on any of them gives the output sharded alike; sharded on
  ``dim`` itself when its shards are even: each rank then repeats exactly the
  rows of its own output shard. Without ``dim`` the input is flattened first:
  sharded on its first dimension, evenly, the flattened output is sharded on
  its only one;
- the gradient sums each run of ``repeats`` back, so it shards the same ways
  (the gradient and the input alike).
"""

import torch
from torch.distributed.tensor._op_schema import OpSchema, OpStrategy, PlacementList, RuntimeSchemaInfo
from torch.distributed.tensor._ops.utils import expand_to_full_mesh_op_strategy, register_op_strategy
from torch.distributed.tensor.placement_types import Replicate, Shard

from torch_npu.distributed.tensor._sharding import Candidate, sharding_rule

FORWARD = torch.ops.aten.repeat_interleave.self_int


def _evenly(shape, d, shards):
    return shape[d] % shards == 0


def _forward_dims(shape, dim, shards):
    """The input dimensions the output may be sharded along, alike."""
    if dim is None:
        return [0] if len(shape) > 0 and _evenly(shape, 0, shards) else []
    dim = dim % len(shape)
    return [d for d in range(len(shape)) if d != dim or _evenly(shape, d, shards)]


def forward_strategy(op_schema: OpSchema) -> OpStrategy:
    mesh = op_schema.get_mesh_from_args()
    x = op_schema.args_schema[0]
    shape = x.strategies[0].output_spec.tensor_meta.shape
    dim = op_schema.args_schema[2] if len(op_schema.args_schema) > 2 else op_schema.kwargs_schema.get("dim")
    # each strategy: the output's placement, then the input's (repeats, dim, output_size are not tensors)
    strategies: list[PlacementList] = [[Replicate(), Replicate()]]
    for d in _forward_dims(shape, dim, mesh.size(0)):
        strategies.append([Shard(0) if dim is None else Shard(d), Shard(d)])
    return expand_to_full_mesh_op_strategy(mesh, op_schema, strategies, input_index=1)


# The count, dim and output size decide the output's shape: all three key DTensor's cache.
register_op_strategy(FORWARD, schema_info=RuntimeSchemaInfo(1, ["output_size"]))(forward_strategy)


@sharding_rule("repeat_interleave_backward_int")
def _backward(args):
    x, dim = args["self"], args["dim"]
    candidates = [Candidate(inputs={}, outputs=[Replicate()])]
    if dim is not None:
        shards = x.device_mesh.size(0)
        for d in _forward_dims(tuple(x.shape), dim, shards):
            candidates.append(Candidate(inputs={"grad": Shard(d), "self": Shard(d)}, outputs=[Shard(d)]))
    return candidates
