"""pipeline(mode="fx"): torch's pipeline split over a torch.fx trace.

torch.distributed.pipelining traces the model with torch.export, which fails
on models it cannot capture whole (data-dependent Python, unsupported
operators, modules that must stay opaque). Real torch_npu adds an FX mode:
the model is traced symbolically, with the modules named in ``atomic_units``
(and torch.nn's own layers) kept as calls, not traced through. vNPU does the
same in four steps:

1. trace with torch.fx (``atomic_units`` leaf modules; arguments given as
   None are specialised away, so stage 0 takes only the tensors);
2. put torch's split marker (``torch.ops.pippy._pipe_split``) before or after
   the nodes of each module of ``split_spec``, found by the module path FX
   records on every node (``nn_module_stack``);
3. run the graph once on the example inputs and keep each node's output as a
   fake tensor in ``meta["val"]``, which torch's PipelineStage sizes its
   receive buffers from (torch.export gives these to the export mode). The
   values come from a real run, not from fake-tensor propagation, because
   the atomic units are exactly the code that may not run on fake tensors
   (Python branches on values); buffers the run updates (batch-norm
   statistics) are restored after it;
4. hand the graph to torch's own splitter (``Pipe._from_traced``), which
   partitions it into ``submod_pp_<i>`` stages and moves the parameters.
   That splitter re-nests each stage's nodes into modules from export's
   flat graphs (``_outline_submodules``); an FX stage already calls its
   modules, so the stage is kept as it is.
"""

import contextlib
import inspect
from typing import Any, Optional

import torch
import torch.fx as fx
from torch.distributed.pipelining import SplitPoint
from torch.distributed.pipelining import _IR
from torch._subclasses import FakeTensorMode
from torch.utils._pytree import tree_map

__all__ = []


class _PipelineTracer(fx.Tracer):
    """Traces through every module but torch.nn's layers and the atomic units."""

    def __init__(self, atomic_units):
        super().__init__()
        self.atomic_units = frozenset(atomic_units or ())

    def is_leaf_module(self, module, qualified_name):
        return qualified_name in self.atomic_units or super().is_leaf_module(module, qualified_name)


def _check_atomic_units(module, atomic_units):
    if atomic_units is None:
        return
    if not isinstance(atomic_units, (list, tuple)) or not all(isinstance(n, str) for n in atomic_units):
        raise TypeError(f"`atomic_units` should be a list of submodule names, got {atomic_units!r}")
    names = dict(module.named_modules())
    missing = [n for n in atomic_units if n not in names or n == ""]
    if missing:
        raise ValueError(f"`atomic_units` names submodules the module does not have: {missing}")


def _bind_examples(module, mb_args, mb_kwargs):
    """{parameter name: example} of the module's forward, for its positional and keyword parameters."""
    signature = inspect.signature(module.forward)
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ValueError("pipeline(mode='fx') traces forward(...) by its parameter names: a forward with "
                             f"*args or **kwargs ({p.name}) cannot be traced; use mode='export'")
    bound = signature.bind(*mb_args, **(mb_kwargs or {}))
    bound.apply_defaults()
    return dict(bound.arguments)


def _owners(node):
    """The module paths a node belongs to (FX records them while tracing)."""
    stack = node.meta.get("nn_module_stack", {})
    owners = [v[0] if isinstance(v, tuple) else v for v in stack.values()]
    if node.op == "call_module":
        owners.append(node.target)
    return owners


def _insert_split_points(gm, split_spec):
    marker = torch.ops.pippy._pipe_split.default
    for name, point in split_spec.items():
        nodes = [n for n in gm.graph.nodes if any(o == name or o.startswith(name + ".") for o in _owners(n))]
        if not nodes:
            raise ValueError(f"split_spec names {name!r}, which the traced forward never calls")
        if point == SplitPoint.BEGINNING:
            with gm.graph.inserting_before(nodes[0]):
                gm.graph.call_function(marker, ())
        elif point == SplitPoint.END:
            with gm.graph.inserting_after(nodes[-1]):
                gm.graph.call_function(marker, ())
        else:
            raise ValueError(f"split_spec values should be SplitPoint.BEGINNING or SplitPoint.END, got {point!r}")
    gm.recompile()


def _drop_none_inputs(gm):
    """Removes the placeholders of arguments specialised to None (and FX's
    checks of them): the stages take only the inputs that carry data."""
    specialised = set()
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is fx._symbolic_trace._assert_is_none:
            specialised.update(arg for arg in node.args if isinstance(arg, fx.Node))
            gm.graph.erase_node(node)
    for node in specialised:
        if node.op == "placeholder" and not node.users:
            gm.graph.erase_node(node)
    gm.recompile()


class _RecordValues(fx.Interpreter):
    def __init__(self, gm):
        super().__init__(gm)
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)

    def run_node(self, node):
        result = super().run_node(node)
        node.meta["val"] = tree_map(
            lambda v: self.fake_mode.from_tensor(v) if isinstance(v, torch.Tensor) else v, result)
        return result


def _record_values(gm, module, inputs):
    buffers = {name: b.detach().clone() for name, b in module.named_buffers()}
    try:
        with torch.no_grad():
            _RecordValues(gm).run(*inputs)
    finally:
        with torch.no_grad():
            for name, b in module.named_buffers():
                b.copy_(buffers[name])


class _TracedProgram:
    """What Pipe._from_traced reads of an ExportedProgram: the graph module, and no lifted constants."""

    constants: dict = {}

    def __init__(self, gm):
        self._gm = gm

    def module(self, *args, **kwargs):
        return self._gm


@contextlib.contextmanager
def _stages_kept_as_traced():
    outline = _IR._outline_submodules
    _IR._outline_submodules = lambda graph: graph.owning_module
    try:
        yield
    finally:
        _IR._outline_submodules = outline


def pipeline_fx(module: torch.nn.Module, mb_args: tuple, mb_kwargs: Optional[dict], split_spec,
                split_policy, atomic_units) -> Any:
    _check_atomic_units(module, atomic_units)
    examples = _bind_examples(module, tuple(mb_args), mb_kwargs)
    concrete = {name: value for name, value in examples.items() if value is None}
    try:
        graph = _PipelineTracer(atomic_units).trace(module, concrete_args=concrete or None)
    except Exception as e:
        raise RuntimeError(f"pipeline(mode='fx') could not trace the module with torch.fx ({type(e).__name__}: "
                           f"{e}); name the submodules FX cannot trace in `atomic_units`") from e
    gm = fx.GraphModule(module, graph)
    _drop_none_inputs(gm)
    if split_spec:
        _insert_split_points(gm, split_spec)
    inputs = [examples[n.target] for n in gm.graph.nodes if n.op == "placeholder"]
    _record_values(gm, module, inputs)
    with _stages_kept_as_traced():
        return _IR.Pipe._from_traced(module, _TracedProgram(gm), _IR.MultiUseParameterConfig.REPLICATE,
                                     split_policy=split_policy)
