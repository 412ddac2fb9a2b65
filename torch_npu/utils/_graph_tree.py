"""The "npugraphs" compile backend, and NPU graphs' part of the Inductor setup.

"npugraphs" is torch's "cudagraphs" backend (torch/_dynamo/backends/
cudagraphs.py) for npu. AOTAutograd splits the Dynamo graph into a forward
and a backward FX graph; each runs eagerly (no Inductor code generation) as a
function of the NPU graph tree of its device (torch_npu/npu/_graph_tree.py:
the first call warms up, the second records, later calls replay). A graph the
tree cannot take - one that mutates an input, runs on anything but a single
npu, or holds an op that cannot be captured - runs eagerly instead, as
torch's backend skips CUDA graphs for such graphs.

The backend's entry point (torch_npu/dynamo/__init__.py) imports this module
at the first compilation, never at ``import torch_npu``.
"""

import torch

from torch_npu.npu._graph_tree_state import npugraph_mark_step_begin

__all__ = []


def npugraphs(dynamo_model, dynamo_inputs):
    """Compiles the Dynamo graph ``dynamo_model`` for its example inputs."""
    from torch._dynamo.backends.common import aot_autograd

    compilers = _TreeCompilers(len(dynamo_inputs))
    return aot_autograd(
        fw_compiler=compilers.forward,
        bw_compiler=compilers.backward,
        inference_compiler=compilers.inference,
        keep_inference_input_mutations=torch._dynamo.config.cudagraph_backend_keep_input_mutation,
    )(dynamo_model, dynamo_inputs)


class NpugraphsBackend:
    """The backend registered as "npugraphs". It takes a graph module and its
    example inputs only: compile options belong to other backends."""

    compiler_name = "npugraphs"

    @staticmethod
    def reset():
        from torch_npu.dynamo import _npugraphs_backend_entrypoint

        _npugraphs_backend_entrypoint.reset()

    def __call__(self, model, inputs):
        return npugraphs(model, inputs)


def _apply_npugraph_tree_methods():
    """NPU graphs' step of the Inductor setup: "npugraphs" is registered with
    Dynamo (by its entry point as a rule; here if it was not), and
    ``torch.compiler.npugraph_mark_step_begin`` is the graph trees' marker."""
    from torch._dynamo.backends import registry

    if "npugraphs" not in registry._COMPILER_FNS:
        from torch_npu.dynamo import _npugraphs_backend_entrypoint

        registry.register_backend(compiler_fn=_npugraphs_backend_entrypoint, name="npugraphs")
    torch.compiler.npugraph_mark_step_begin = npugraph_mark_step_begin


class _TreeCompilers:
    """AOTAutograd's compilers for one Dynamo graph. The backward follows
    the forward: once the forward runs eagerly, so does the backward, and a
    backward that runs eagerly still tells the forward's tree that a backward
    is running."""

    def __init__(self, num_dynamo_inputs):
        self._num_dynamo_inputs = num_dynamo_inputs
        self._forward_in_tree = True
        self._forward_device = None

    def forward(self, gm, example_inputs, is_inference=False):
        from torch._inductor.utils import num_fw_fixed_arguments

        run_boxed = _boxed(gm, example_inputs)
        # The leading inputs that are parameters and buffers stay put between calls.
        num_fixed = num_fw_fixed_arguments(self._num_dynamo_inputs, len(example_inputs))
        reason = _reason_to_run_eagerly(gm, num_fixed)
        if reason is not None:
            _log_skip(reason)
            self._forward_in_tree = False
            return run_boxed
        self._forward_device = _npu_index(gm)
        return _run_in_tree(run_boxed, gm, example_inputs, num_fixed, self._forward_device,
                            is_backward=False, is_inference=is_inference)

    def inference(self, gm, example_inputs):
        return self.forward(gm, example_inputs, is_inference=True)

    def backward(self, gm, example_inputs):
        from torch._inductor.utils import count_tangents

        run_boxed = _boxed(gm, example_inputs)
        if not self._forward_in_tree:
            return gm
        # The tangents come first; what follows is saved by the forward.
        num_fixed = count_tangents(gm)
        reason = _reason_to_run_eagerly(gm, num_fixed)
        if reason is None:
            return _run_in_tree(run_boxed, gm, example_inputs, num_fixed, _npu_index(gm),
                                is_backward=True, is_inference=False)
        _log_skip(reason)
        return self._eager_backward(gm)

    def _eager_backward(self, gm):
        from torch_npu.npu._graph_tree import get_manager

        # Note [Backward Generation Handling] in torch's cudagraph_trees: the
        # forward's tree must know that its outputs are being consumed.
        tree = get_manager(self._forward_device, create_if_none_exists=False)

        def backward_eagerly(inputs):
            if tree is not None:
                tree.set_to_running_backward()
            return gm(inputs)

        backward_eagerly._boxed_call = True
        return backward_eagerly


def _boxed(gm, example_inputs):
    """``gm`` as a function of one list of inputs (which it empties), run
    by Python. This switches ``gm`` itself to that calling convention too,
    which the eager paths above rely on."""
    from torch._dynamo.backends.debugging import boxed_nop

    return boxed_nop(gm, example_inputs)


def _run_in_tree(run_boxed, gm, example_inputs, num_fixed, device_index, *, is_backward, is_inference):
    """``run_boxed`` (``gm``, boxed) as a function of the NPU graph tree of
    ``device_index``."""
    from torch._dynamo.backends.cudagraphs import find_input_mutations, get_stack_traces
    from torch._inductor.cudagraph_utils import get_placeholder_info

    from torch_npu.npu._graph_tree import npugraphify_impl

    graph = gm.graph
    compiled = npugraphify_impl(
        run_boxed, example_inputs, range(num_fixed),
        device_index=device_index, is_backward=is_backward, is_inference=is_inference,
        stack_traces=get_stack_traces(gm), placeholders=get_placeholder_info(graph),
        mutated_input_idxs=find_input_mutations(graph))
    compiled._boxed_call = True
    return compiled


def _npu_index(gm):
    """The index of the npu ``gm`` computes on (0 for the current one), or
    None when it computes on no npu."""
    from torch._dynamo.backends.cudagraphs import get_device_node_mapping

    for device in get_device_node_mapping(gm):
        if device.type == "npu":
            return device.index or 0
    return None


def _reason_to_run_eagerly(gm, num_fixed):
    """Why the tree cannot take ``gm``, or None. torch's reasons to skip CUDA
    graphs (``check_for_skip``), with npu the device the graphs run on."""
    from torch._dynamo.backends.cudagraphs import (
        check_for_mutation_ignore_cuda_graph_managed_tensor,
        get_device_node_mapping,
    )
    from torch._inductor.utils import get_first_incompatible_cudagraph_node

    # Mutating an input the tree does not manage would be replayed onto the
    # recording's copy, not the caller's tensor.
    if not torch._dynamo.config.cudagraph_backend_support_input_mutation:
        mutated = check_for_mutation_ignore_cuda_graph_managed_tensor(gm, num_fixed)
        if mutated:
            return mutated
    devices = [device for device in get_device_node_mapping(gm) if device.type != "meta"]
    if [device.type for device in devices] != ["npu"]:
        return "devices other than one npu: " + ", ".join(map(repr, devices))
    op = get_first_incompatible_cudagraph_node(gm)
    return None if op is None else f"incompatible op ({op.name})"


def _log_skip(reason):
    from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

    log_cudagraph_skip_and_bump_counter(f"skipping NPU graphs due to {reason}")
