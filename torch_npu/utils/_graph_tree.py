"""The "npugraphs" compile backend and NPU graphs' part of the Inductor setup.

``npugraphs`` is torch's "cudagraphs" backend for npu: AOTAutograd's eager FX
graphs of the forward and the backward, each a function of the device's NPU
graph tree (torch_npu/npu/_graph_tree.py: the first call warms up, the next
records, later ones replay), with no Inductor code generation. Graphs that
the tree cannot take (inputs on another device, inputs they mutate) run
without NPU graphs, as torch's backend skips CUDA graphs for them.
Imported by the backend's entry point at the first compilation
(torch_npu/dynamo/__init__.py), never at ``import torch_npu``.
"""

import functools

import torch

from torch_npu.npu._graph_tree_state import npugraph_mark_step_begin

__all__ = []


def _device_index(gm):
    from torch._dynamo.backends.cudagraphs import get_device_node_mapping

    devices = [d for d in get_device_node_mapping(gm) if d.type == "npu"]
    return (devices[0].index or 0) if devices else None


def _skip_reason(gm, num_fixed):
    """Why the tree cannot take ``gm`` (None if it can): torch's reasons for
    CUDA graphs (``check_for_skip``), with npu the device graphs run on."""
    from torch._dynamo import config as dynamo_config
    from torch._dynamo.backends.cudagraphs import (
        check_for_mutation_ignore_cuda_graph_managed_tensor,
        get_device_node_mapping,
    )
    from torch._inductor.utils import get_first_incompatible_cudagraph_node

    if not dynamo_config.cudagraph_backend_support_input_mutation:
        mutation = check_for_mutation_ignore_cuda_graph_managed_tensor(gm, num_fixed)
        if mutation:
            return mutation
    devices = [d for d in get_device_node_mapping(gm) if d.type != "meta"]
    if len(devices) != 1 or devices[0].type != "npu":
        return f"devices other than one npu: {', '.join(repr(d) for d in devices)}"
    node = get_first_incompatible_cudagraph_node(gm)
    if node is not None:
        return f"incompatible op ({node.name})"
    return None


def npugraphs(dynamo_model, dynamo_inputs):
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.backends.cudagraphs import find_input_mutations, get_stack_traces
    from torch._dynamo.backends.debugging import boxed_nop
    from torch._inductor.cudagraph_utils import get_placeholder_info, log_cudagraph_skip_and_bump_counter
    from torch._inductor.utils import BoxedBool, count_tangents, num_fw_fixed_arguments

    from torch_npu.npu._graph_tree import get_manager, npugraphify_impl

    use_graphs = BoxedBool(True)
    forward_device = [None]

    def forward_compiler(aot_model, aot_inputs, is_inference=False):
        interp = boxed_nop(aot_model, aot_inputs)
        fixed = num_fw_fixed_arguments(len(dynamo_inputs), len(aot_inputs))
        skip = _skip_reason(aot_model, fixed)
        if skip:
            BoxedBool.disable(use_graphs)
            log_cudagraph_skip_and_bump_counter(f"skipping NPU graphs due to {skip}")
            return interp
        forward_device[0] = _device_index(aot_model)
        out = npugraphify_impl(interp, aot_inputs, range(fixed), device_index=forward_device[0], is_backward=False,
                               is_inference=is_inference, stack_traces=get_stack_traces(aot_model),
                               placeholders=get_placeholder_info(aot_model.graph),
                               mutated_input_idxs=find_input_mutations(aot_model.graph))
        out._boxed_call = True
        return out

    def backward_compiler(aot_model, aot_inputs):
        interp = boxed_nop(aot_model, aot_inputs)
        if not use_graphs:
            return aot_model
        fixed = count_tangents(aot_model)
        skip = _skip_reason(aot_model, fixed)
        if skip:
            log_cudagraph_skip_and_bump_counter(f"skipping NPU graphs due to {skip}")
            manager = get_manager(forward_device[0], create_if_none_exists=False)

            def run_backward(inputs):
                # Note [Backward Generation Handling] in torch's cudagraph_trees.
                if manager is not None:
                    manager.set_to_running_backward()
                return aot_model(inputs)

            run_backward._boxed_call = True
            return run_backward
        out = npugraphify_impl(interp, aot_inputs, range(fixed), device_index=_device_index(aot_model),
                               is_backward=True, is_inference=False, stack_traces=get_stack_traces(aot_model),
                               placeholders=get_placeholder_info(aot_model.graph),
                               mutated_input_idxs=find_input_mutations(aot_model.graph))
        out._boxed_call = True
        return out

    return aot_autograd(fw_compiler=forward_compiler, bw_compiler=backward_compiler,
                        inference_compiler=functools.partial(forward_compiler, is_inference=True),
                        keep_inference_input_mutations=torch._dynamo.config.cudagraph_backend_keep_input_mutation,
                        )(dynamo_model, dynamo_inputs)


class NpugraphsBackend:
    """The registered "npugraphs" backend: a graph module and its example
    inputs, nothing else (compile options are not this backend's)."""

    compiler_name = "npugraphs"

    @staticmethod
    def reset():
        from torch_npu.dynamo import _npugraphs_backend_entrypoint

        _npugraphs_backend_entrypoint.reset()

    def __call__(self, model, inputs):
        return npugraphs(model, inputs)


def _apply_npugraph_tree_methods():
    """At the Inductor setup: "npugraphs" is registered (by its entry point
    usually, else here) and the step marker is the graph trees' own."""
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if "npugraphs" not in _COMPILER_FNS:
        from torch_npu.dynamo import _npugraphs_backend_entrypoint

        register_backend(name="npugraphs", compiler_fn=_npugraphs_backend_entrypoint)
    torch.compiler.npugraph_mark_step_begin = npugraph_mark_step_begin
