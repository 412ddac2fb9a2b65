"""How an npu fused operator runs on DTensors: sharding rules and the call.

Real torch_npu registers a sharding strategy for each of its fused
operators with DTensor (`npu_fusion_attention` sharded by batch or by head,
`npu_rms_norm` by any dimension it does not normalise, ...). vNPU's
operators are compositions of ATen operators registered as
CompositeImplicitAutograd (torch_npu/op_plugin/_library.py), so DTensor
never sees them whole: it sees the ATen operators inside, and for some of
them it has no sharding that keeps the fused operator's meaning (a flash
attention whose head size is sharded, a grouped matmul whose list
arguments arrive as local shards).

So the operator's own kernel asks first: when an argument is a DTensor and
a rule is registered for the operator, `dtensor_call` runs it the way
DTensor runs an operator it has a strategy for:

1. the rule lists candidate shardings for one mesh dimension, each the
   placement every tensor argument must have and the placement each output
   then has (Note [Choosing a candidate]);
2. each argument is redistributed to its candidate placement and made
   local (`redistribute`, `to_local`: both differentiable);
3. the operator runs on the local tensors, with arguments the rule rewrites
   for a shard (a head count divided by the shards of the head dimension);
4. the outputs become DTensors with the candidate's output placements
   (`DTensor.from_local`, differentiable).

Autograd records steps 2-4, so the backward is the local composition's
backward between DTensor's own redistributions: no separate rule for the
gradient operators is needed for training, though the gradient operators
called directly have rules too. Under inference mode (and for operators
registered below autograd) DTensor's dispatcher sees the operator itself and
calls `dtensor_call` through a custom handler (`install_dtensor_handlers`).

Operators without a rule keep DTensor's behaviour: their ATen operators are
sharded one by one.
"""

import dataclasses
import functools
import math
from typing import Callable, Dict, Optional, Sequence

import torch
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

__all__ = ["Candidate", "sharding_rule", "dtensor_call", "has_rule", "install_dtensor_handlers"]


@dataclasses.dataclass
class Candidate:
    """One way to run an operator over one mesh dimension.

    inputs: argument name -> placement (a tensor-list argument's placement
        applies to each element). Tensor arguments not named must be
        replicated.
    outputs: one placement per returned value (None for a non-tensor value;
        for a returned list, the placement of each element).
    kind: a name the argument rewrite can count shards by ("tp").
    """
    inputs: Dict[str, object]
    outputs: Sequence[Optional[object]]
    kind: str = ""


# "npu::name.overload" -> (rule, local argument rewrite or None)
_RULES: Dict[str, tuple] = {}


def sharding_rule(*op_names, rewrite: Optional[Callable] = None):
    """Registers ``rule(args) -> [Candidate, ...]`` for the named operators.

    ``args`` is the call's arguments by schema name, defaults filled in.
    ``rewrite(args, shards)``, if given, returns the arguments for the
    local call; ``shards(kind)`` is the number of shards the chosen
    candidates of that kind split a dimension into."""
    def register(rule):
        for name in op_names:
            qualified = name if "." in name else name + ".default"
            _RULES["npu::" + qualified] = (rule, rewrite)
        return rule
    return register


def has_rule(qualified_name):
    return qualified_name in _RULES


# --- the call ---------------------------------------------------------------

def _op(qualified_name):
    packet, overload = qualified_name[len("npu::"):].split(".", 1)
    return getattr(getattr(torch.ops.npu, packet), overload)


def _bind(op, args, kwargs):
    """The arguments by schema name, with the schema's defaults."""
    bound = {}
    for i, arg in enumerate(op._schema.arguments):
        if i < len(args) and not arg.kwarg_only:
            bound[arg.name] = args[i]
        elif arg.name in kwargs:
            bound[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
        else:
            bound[arg.name] = None
    return bound


def _unbind(op, bound):
    """Positional arguments up to the first keyword-only one, then keywords."""
    args, kwargs = [], {}
    for arg in op._schema.arguments:
        if arg.kwarg_only:
            kwargs[arg.name] = bound[arg.name]
        else:
            args.append(bound[arg.name])
    return args, kwargs


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def _placement_for(candidate, name, tensor=None):
    """The candidate's placement for argument `name` (a negative Shard dimension counted from `tensor`'s end)."""
    p = candidate.inputs.get(name, Replicate())
    if isinstance(p, Shard) and p.dim < 0 and tensor is not None:
        p = Shard(p.dim + tensor.dim())
    return p


# Note [Choosing a candidate]
# Per mesh dimension the candidate chosen is the one whose redistribution
# moves the fewest elements: keeping a placement costs nothing, and so does
# cutting a replicated tensor into shards (each rank keeps its slice);
# gathering shards, moving a shard to another dimension or reducing partial
# sums moves the tensor (twice for an all-reduce). Candidates that cost the
# same are taken in the rule's order, which lists the replicated one first.
# This is the choice DTensor's own strategies make with their costs.

def _move_cost(current, target, numel):
    if current == target:
        return 0
    if isinstance(current, Replicate):
        return 0 if isinstance(target, Shard) else numel
    if isinstance(current, Partial) and isinstance(target, Replicate):
        return 2 * numel
    return numel


def _choose(candidates, bound, mesh_dim, mutated):
    best, best_cost = None, None
    for candidate in candidates:
        cost = 0
        for name, value in bound.items():
            for t in _tensors(value):
                if isinstance(t, DTensor):
                    move = _move_cost(t.placements[mesh_dim], _placement_for(candidate, name, t), t.numel())
                    # an argument updated in place cannot move: a candidate that moves it is the last resort
                    cost += math.inf if move and name in mutated else move
        if best_cost is None or cost < best_cost:
            best, best_cost = candidate, cost
    return best


def _mutated_arguments(op):
    return {arg.name for arg in op._schema.arguments if arg.alias_info is not None and arg.alias_info.is_write}


def _refuse_mixed(op_name, bound):
    # Integer tensors beside DTensors are index arguments (group lists, sequence lengths: the kernel's
    # host-side arguments, which torch_npu's wrappers make tensors of lists); they pass through whole.
    for name, value in bound.items():
        for t in _tensors(value):
            if not isinstance(t, DTensor) and t.dim() > 0 and (t.is_floating_point() or t.is_complex()):
                raise RuntimeError(
                    f"{op_name}: got mixed torch.Tensor and DTensor arguments ('{name}' is a torch.Tensor): "
                    "convert every tensor argument to a DTensor (DTensor.from_local or distribute_tensor) first.")


def _mesh_of(bound):
    for value in bound.values():
        for t in _tensors(value):
            if isinstance(t, DTensor):
                return t.device_mesh
    raise AssertionError("dtensor_call without a DTensor argument")


def _splits_work(candidate):
    return any(p is not None and not isinstance(p, Replicate) for p in candidate.outputs)


# Note [The gradient of a replicated argument]
# Where a candidate splits the work (some output is sharded or partial), a
# replicated argument meets only this rank's part of the computation, so its
# local gradient is this rank's share of the whole: the gradient is Partial
# (summed over the mesh dimension), as the gradient of a replicated weight in
# data parallelism. Where every output is replicated, each rank computed
# everything and its gradient is whole: Replicate.

def _grad_placements(placements, chosen):
    return [Partial() if isinstance(p, Replicate) and _splits_work(c) else p for p, c in zip(placements, chosen)]


def _localise(value, chosen, mesh, mutated, name, op_name):
    def one(t):
        if not isinstance(t, DTensor):
            return t
        placements = [_placement_for(c, name, t) for c in chosen]
        grad_placements = _grad_placements(placements, chosen)
        if t.device_mesh != mesh:
            raise RuntimeError(f"{op_name}: argument '{name}' is on another device mesh than the first DTensor "
                               "argument; DTensor operators need all arguments on one mesh.")
        if tuple(t.placements) != tuple(placements):
            if name in mutated:
                raise RuntimeError(
                    f"{op_name}: the in-place argument '{name}' has placements {tuple(t.placements)}, but the "
                    f"operator needs {tuple(placements)} to update it where it lies: redistribute it first.")
            t = t.redistribute(mesh, placements)
        return t.to_local(grad_placements=grad_placements)
    if isinstance(value, (list, tuple)):
        return type(value)(one(v) for v in value)
    return one(value)


def _is_even(bound, chosen, mesh):
    for name, value in bound.items():
        for t in _tensors(value):
            for mesh_dim, candidate in enumerate(chosen):
                p = _placement_for(candidate, name, t)
                if isinstance(t, DTensor) and isinstance(p, Shard) and t.shape[p.dim] % mesh.size(mesh_dim):
                    return False
    return True


def _wrap(local, placements, mesh, even):
    shape = None
    if not even and any(isinstance(p, Shard) for p in placements):
        if mesh.ndim != 1:
            raise NotImplementedError(
                "vNPU runs npu fused operators on DTensors sharded unevenly only on 1-d device meshes; "
                "make the sharded dimensions divisible by the mesh size.")
        from torch._prims_common import make_contiguous_strides_for
        from torch.distributed.tensor._utils import compute_global_tensor_shape
        shape = compute_global_tensor_shape(local.shape, mesh, placements)
    return DTensor.from_local(local, mesh, placements, run_check=False, shape=shape,
                              stride=None if shape is None else make_contiguous_strides_for(shape))


def dtensor_call(qualified_name, args, kwargs):
    """Runs ``npu::<qualified_name>`` on DTensor arguments by its sharding rule."""
    op = _op(qualified_name)
    op_name = "torch_npu." + qualified_name[len("npu::"):].split(".", 1)[0]
    rule, rewrite = _RULES[qualified_name]
    bound = _bind(op, args, kwargs)
    _refuse_mixed(op_name, bound)
    mesh = _mesh_of(bound)
    if mesh.get_coordinate() is None:
        raise NotImplementedError(f"{op_name} on DTensors: this rank is not part of the arguments' device mesh; "
                                  "call it on the mesh's ranks only.")
    candidates = rule(bound)
    for candidate in candidates:
        unknown = set(candidate.inputs) - set(bound)
        assert not unknown, f"{qualified_name}'s sharding rule names arguments it does not have: {unknown}"
    mutated = _mutated_arguments(op)
    chosen = [_choose(candidates, bound, mesh_dim, mutated) for mesh_dim in range(mesh.ndim)]

    local = {}
    for name, value in bound.items():
        local[name] = _localise(value, chosen, mesh, mutated, name, op_name)
    if rewrite is not None:
        def shards(kind):
            return math.prod(mesh.size(d) for d, c in enumerate(chosen) if c.kind == kind)
        local = rewrite(local, shards)
    local_args, local_kwargs = _unbind(op, local)
    result = op(*local_args, **local_kwargs)

    even = _is_even(bound, chosen, mesh)
    returns = op._schema.returns
    single = len(returns) == 1
    results = [result] if single else list(result)
    wrapped = []
    for i, value in enumerate(results):
        alias = returns[i].alias_info
        if alias is not None and alias.is_write:
            # An in-place or out= result is the argument it updated.
            wrapped.append(_written_argument(op, bound, alias))
            continue
        placements = [c.outputs[i] for c in chosen]
        if value is None:
            wrapped.append(None)
        elif isinstance(value, torch.Tensor):
            wrapped.append(_wrap(value, placements, mesh, even))
        elif isinstance(value, (list, tuple)):
            wrapped.append(type(value)(_wrap(v, placements, mesh, even) for v in value))
        else:
            wrapped.append(value)
    return wrapped[0] if single else tuple(wrapped)


def _written_argument(op, bound, alias):
    for arg in op._schema.arguments:
        if arg.alias_info is not None and arg.alias_info.before_set == alias.before_set:
            return bound[arg.name]
    raise AssertionError(f"{op._schema.name}: no argument for the written result {alias}")


# --- DTensor's dispatcher: operators below autograd --------------------------

def _handler(qualified_name, op_call, args, kwargs):
    return dtensor_call(qualified_name, args, kwargs)


def install_dtensor_handlers():
    """Lets DTensor's dispatcher run the ruled operators it sees itself:
    those registered below autograd, and any operator under inference mode."""
    handlers = DTensor._op_dispatcher._custom_op_handlers
    for qualified_name in _RULES:
        handlers[_op(qualified_name)] = functools.partial(_handler, qualified_name)

