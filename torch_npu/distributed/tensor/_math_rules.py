"""Sharding rules for npu normalisations, rotary embedding, gated and
elementwise activations, and npu_conv2d on DTensors.

Each of these operators is independent along some dimensions of its main
input (the rows of a normalisation, every dimension but the rotated one of a
rotary embedding, all but the gated one of a SwiGLU), so it runs sharded
along any of them with its other tensors following: a weight that applies
to every row stays replicated (its gradient is then partial,
Note [The gradient of a replicated argument]); a broadcast operand (a
rotary table of size 1 on the sharded dimension) stays replicated, a full
one is sharded with the input.
"""

import torch
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor._ops import _view_ops

from torch_npu.distributed.tensor._sharding import Candidate, sharding_rule


def _replicated(n_outputs):
    return Candidate(inputs={}, outputs=[Replicate()] * n_outputs)


# --- RMS normalisation --------------------------------------------------------

def _rows(x, gamma):
    """The dimensions of x an RMS norm does not normalise."""
    return range(x.dim() - gamma.dim())


@sharding_rule("npu_rms_norm")
def _rms_norm(args):
    # (y, rstd); rstd keeps x's rank with the normalised dimensions of size 1
    return [_replicated(2)] + [Candidate(inputs={"self": Shard(d)}, outputs=[Shard(d), Shard(d)])
                               for d in _rows(args["self"], args["gamma"])]


@sharding_rule("npu_rms_norm_backward")
def _rms_norm_backward(args):
    # (dx, dgamma): dgamma sums over the rows, so sharded rows leave it partial
    return [_replicated(2)] + [Candidate(inputs={"dy": Shard(d), "self": Shard(d), "rstd": Shard(d)},
                                         outputs=[Shard(d), Partial()])
                               for d in _rows(args["self"], args["gamma"])]


@sharding_rule("npu_add_rms_norm")
def _add_rms_norm(args):
    # (y, rstd, x1 + x2)
    return [_replicated(3)] + [Candidate(inputs={"x1": Shard(d), "x2": Shard(d)}, outputs=[Shard(d)] * 3)
                               for d in _rows(args["x1"], args["gamma"])]


# --- rotary embedding -----------------------------------------------------------

def _table_placement(table, x, d):
    """A cos/sin table on a sharding of x's dimension d: sharded with x where it has that dimension in full."""
    lead = x.dim() - table.dim()
    if d < lead or table.shape[d - lead] == 1:
        return Replicate(), True
    return Shard(d - lead), False


def _rotary_candidates(args, inputs_like_x, n_outputs, tables_in_outputs):
    x = args["self"]
    candidates = [_replicated(n_outputs)]
    for d in range(x.dim() - 1):  # the last dimension is rotated
        inputs = {name: Shard(d) for name in inputs_like_x}
        outputs = [Shard(d)] * (n_outputs - len(tables_in_outputs))
        for name in ("r1", "r2"):
            placement, broadcast = _table_placement(args[name], x, d)
            inputs[name] = placement
            if name in tables_in_outputs:
                # a table's gradient sums over where it was broadcast
                outputs.append(Partial() if broadcast else placement)
        candidates.append(Candidate(inputs=inputs, outputs=outputs))
    return candidates


@sharding_rule("npu_rotary_mul")
def _rotary_mul(args):
    return _rotary_candidates(args, ("self",), 1, ())


@sharding_rule("npu_rotary_mul_backward")
def _rotary_mul_backward(args):
    # (dx, dr1, dr2)
    return _rotary_candidates(args, ("grad", "self"), 3, ("r1", "r2"))


# --- gated and elementwise activations ----------------------------------------

def _all_but(x, dim):
    dim = dim % x.dim()
    return [d for d in range(x.dim()) if d != dim]


@sharding_rule("npu_swiglu")
def _swiglu(args):
    x = args["self"]
    return [_replicated(1)] + [Candidate(inputs={"self": Shard(d)}, outputs=[Shard(d)])
                               for d in _all_but(x, args["dim"])]


@sharding_rule("npu_swiglu_backward")
def _swiglu_backward(args):
    x = args["self"]
    return [_replicated(1)] + [Candidate(inputs={"grad_output": Shard(d), "self": Shard(d)}, outputs=[Shard(d)])
                               for d in _all_but(x, args["dim"])]


def _elementwise(*names):
    def rule(args):
        x = args[names[0]]
        return [_replicated(1)] + [Candidate(inputs={name: Shard(d) for name in names}, outputs=[Shard(d)])
                                   for d in range(x.dim())]
    return rule


for _name, _inputs in (("npu_fast_gelu", ("self",)), ("fast_gelu", ("input",)), ("npu_gelu", ("self",)),
                       ("npu_silu", ("self",)), ("npu_dtype_cast", ("self",)), ("_npu_dtype_cast", ("self",)),
                       ("npu_dtype_cast_backward", ("grad",)), ("_npu_dtype_cast_backward", ("grad",)),
                       ("npu_fast_gelu_backward", ("grad", "self"))):
    sharding_rule(_name)(_elementwise(*_inputs))


# --- layout ------------------------------------------------------------------------

@sharding_rule("npu_transpose")
def _transpose(args):
    # a permutation moves each sharded dimension to where the permutation puts it
    perm = [p % args["self"].dim() for p in args["perm"]]
    return [_replicated(1)] + [Candidate(inputs={"self": Shard(d)}, outputs=[Shard(perm.index(d))])
                               for d in range(args["self"].dim())]


# DTensor describes its view operators by dimension maps (torch.distributed.tensor._ops._view_ops);
# real torch_npu gives npu_transpose torch.permute's, which code inspecting the table finds.
_view_ops.dim_maps[torch.ops.npu.npu_transpose] = _view_ops.dim_maps[torch.permute]


# --- npu_conv2d ------------------------------------------------------------------

@sharding_rule("npu_conv2d")
def _conv2d(args):
    candidates = [_replicated(1)]
    # by batch: each rank convolves its own images
    candidates.append(Candidate(inputs={"input": Shard(0)}, outputs=[Shard(0)]))
    # by output channel: each rank holds some filters (and their bias)
    candidates.append(Candidate(inputs={"weight": Shard(0), "bias": Shard(0)}, outputs=[Shard(1)]))
    if args["bias"] is None and args["groups"] == 1:
        # by input channel: partial sums of the output (a bias would be added once per rank)
        candidates.append(Candidate(inputs={"input": Shard(1), "weight": Shard(1)}, outputs=[Partial()]))
    return candidates


@sharding_rule("npu_conv2d_backward")
def _conv2d_backward(args):
    # (grad_input, grad_weight, grad_bias)
    return [
        _replicated(3),
        Candidate(inputs={"input": Shard(0), "grad_output": Shard(0)}, outputs=[Shard(0), Partial(), Partial()]),
        Candidate(inputs={"grad_output": Shard(1), "weight": Shard(0)}, outputs=[Partial(), Shard(0), Shard(0)]),
    ]


# --- npu_cross_entropy_loss ----------------------------------------------------

@sharding_rule("npu_cross_entropy_loss")
def _cross_entropy_loss(args):
    # (loss, log_prob, zloss, lse_for_zloss). Rows are independent: sharded by batch, "none" keeps the
    # per-row losses sharded and "sum" leaves partial sums. "mean" divides by the count of the whole
    # batch (weighted, ignored rows excluded), which no rank knows: it runs replicated.
    candidates = [_replicated(4)]
    reduction = args["reduction"]
    if reduction in ("none", "sum"):
        loss = Shard(0) if reduction == "none" else Partial()
        candidates.append(Candidate(inputs={"input": Shard(0), "target": Shard(0)},
                                    outputs=[loss, Shard(0), Replicate(), Replicate()]))
    return candidates


@sharding_rule("npu_cross_entropy_loss_backward")
def _cross_entropy_loss_backward(args):
    candidates = [_replicated(1)]
    reduction = args["reduction"]
    if reduction in ("none", "sum"):
        inputs = {"log_prob": Shard(0), "target": Shard(0)}
        if reduction == "none":
            inputs["grad_loss"] = Shard(0)
        candidates.append(Candidate(inputs=inputs, outputs=[Shard(0)]))
    return candidates
