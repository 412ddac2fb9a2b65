"""FlexAttention (``torch.nn.attention.flex_attention``) on npu, as torch_npu enables it.

torch's front end accepts only the devices it has kernels for ("FlexAttention is
only supported on CUDA, CPU, HPU, or MPS devices"), and its higher-order
operators have autocast rules for CPU and CUDA only. The operators themselves are
device-generic: eagerly they run the dense reference (scores materialised, the
same code CPU runs) and their backward runs on any device, so on npu they only
need to be let through and given an autocast rule:

- ``_validate_device`` accepts npu tensors (after the program imports the front
  end: importing it at ``import torch_npu`` would cost start-up time);
- the ``flex_attention`` and ``flex_attention_backward`` operators get
  AutocastPrivateUse1 kernels: under ``torch.autocast("npu")`` the forward casts
  query, key and value to the autocast dtype, as torch does on CUDA; the
  backward runs as recorded (autograd runs it outside autocast);
- compiled, an npu graph is lowered by Inductor's C++ FlexAttention template,
  which (as on CPU) computes inference without the logsumexp only. A compiled
  call that needs more (``return_lse``, which transformers passes on every
  device but cpu, or inputs that need gradients) takes the eager path instead
  of failing: Dynamo graph-breaks at the operator, so the call runs eagerly
  between the compiled graphs before and after it (Note [Eager FlexAttention
  in an npu graph]).
"""

import torch
from torch._C import DispatchKey

from torch_npu._after_import import call_after_import

_AUTOCAST_NPU = torch._C.DispatchKeySet(DispatchKey.AutocastPrivateUse1)


def _allow_npu(front_end):
    torch_check = front_end._validate_device
    if getattr(torch_check, "_npu_allowed", False):
        return

    def validate_device(query, key, value):
        if query.device.type == "npu":
            return  # devices already checked equal by _validate_sdpa_input
        torch_check(query, key, value)

    validate_device._npu_allowed = True
    front_end._validate_device = validate_device

    torch_options = front_end._apply_kernel_options

    def apply_kernel_options(query, key, value, return_lse, kernel_options, *args, **kwargs):
        options = torch_options(query, key, value, return_lse, kernel_options, *args, **kwargs)
        wants_lse = return_lse or getattr(kwargs.get("return_aux", args[0] if args else None), "lse", False)
        needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
        if query.device.type == "npu" and not wants_lse and not needs_grad:
            # Compiled, npu graphs run on Inductor's CPU template (docs/graph_mode.md),
            # which computes no logsumexp: ask for none when nothing needs it, as
            # torch does on CPU. (Eager runs compute it regardless.)
            options["OUTPUT_LOGSUMEXP"] = False
        return options

    front_end._apply_kernel_options = apply_kernel_options


# Note [Eager FlexAttention in an npu graph]
# Dynamo records a FlexAttention call as the ``flex_attention`` operator with
# its score_mod and mask_mod traced as subgraphs; Inductor then needs a template
# for it. On npu that is the C++ template, which refuses the logsumexp output
# (and so training, whose forward keeps it). Rather than let Inductor fail the
# whole graph, the operator's Dynamo tracer raises a graph break for such calls
# on npu: the operator then runs eagerly, as the front end's eager path runs it
# (``_run_operator_as_the_front_end_does``), and the code around it stays
# compiled. The FlexAttention front end's own
# eager compile (``setup_compilation_env``, backend "eager") and export trace
# the operator as usual: they never reach Inductor.


def _needs_eager_path(query, kernel_options):
    from torch._higher_order_ops.utils import _hop_compile_tls

    if getattr(_hop_compile_tls, "in_hop_compile", False):
        return False
    example = query.as_proxy().node.meta.get("example_value") if hasattr(query, "as_proxy") else None
    if example is None or example.device.type != "npu":
        return False
    options = kernel_options.as_python_constant() if kernel_options.is_python_constant() else {}
    return bool(options.get("OUTPUT_LOGSUMEXP", True)) or (torch.is_grad_enabled() and example.requires_grad)


def _break_graph_where_inductor_cannot(variables):
    variable_class = variables.FlexAttentionHigherOrderVariable
    trace = variable_class._call_function
    if getattr(trace, "_npu_eager_path", False):
        return

    def call_function(self, tx, args, kwargs):
        normalized = self.normalize_to_args(list(args), kwargs)
        if _needs_eager_path(normalized[0], normalized[6]):
            from torch._dynamo.exc import unimplemented

            _run_operator_as_the_front_end_does()
            unimplemented(
                gb_type="FlexAttention on npu needs the eager path",
                context=str(self.value),
                explanation="Inductor's C++ FlexAttention template, which npu graphs use, computes "
                            "inference without the logsumexp only; this call asks for the logsumexp "
                            "or gradients, so it runs eagerly between compiled graphs.",
                hints=["Call it under torch.no_grad() without return_lse to compile it."],
            )
        return trace(self, tx, args, kwargs)

    call_function._npu_eager_path = True
    variable_class._call_function = call_function


def _run_operator_as_the_front_end_does():
    # After the graph break the operator is called eagerly, with the user's
    # score_mod and mask_mod as plain Python functions, while Dynamo's frame hook
    # is still set. Run it as the front end's eager path does: traced by
    # Dynamo's "eager" backend, so tensors the functions capture are lifted as
    # inputs and get their gradients (called directly, they would not), and
    # with Dynamo kept out of the operator's own Python (its dense reference).
    from torch._higher_order_ops.flex_attention import FlexAttentionHOP

    if getattr(FlexAttentionHOP.__call__, "_npu_eager_path", False):
        return
    call_operator = FlexAttentionHOP.__call__

    def call(self, query, key, value, score_mod, block_mask, *args):
        from torch._higher_order_ops.utils import _hop_compile_tls, setup_compilation_env
        from torch.nn.attention import flex_attention as front_end

        # Only the front end's own call is routed (seven arguments, the
        # functions untraced, outside any compilation): a call that passes the
        # lifted buffers comes from a traced graph already, and inside a
        # compilation a nested torch.compile is refused.
        traced = (len(args) != 2 or isinstance(score_mod, torch.fx.GraphModule)
                  or getattr(_hop_compile_tls, "in_hop_compile", False)
                  or torch._guards.TracingContext.try_get() is not None or torch.compiler.is_compiling())
        if query.device.type != "npu" or traced or front_end._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG:
            return call_operator(self, query, key, value, score_mod, block_mask, *args)

        def operator(*operands):
            return self(*operands)

        with setup_compilation_env() as backend:
            return torch.compile(operator, backend=backend, fullgraph=True)(
                query, key, value, score_mod, block_mask, *args)

    call = torch._dynamo.disable(call, recursive=True)
    call._npu_eager_path = True
    FlexAttentionHOP.__call__ = call


def _forward_under_autocast(query, key, value, score_mod, block_mask, scale, kernel_options,
                            score_mod_other_buffers=(), mask_mod_other_buffers=()):
    from torch._higher_order_ops.flex_attention import flex_attention
    from torch.amp.autocast_mode import _cast

    dtype = torch.get_autocast_dtype("npu")
    query, key, value = (_cast(t, "npu", dtype) for t in (query, key, value))
    with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_NPU):
        return flex_attention(query, key, value, score_mod, block_mask, scale, kernel_options,
                              score_mod_other_buffers, mask_mod_other_buffers)


def _backward_under_autocast(*args):
    from torch._higher_order_ops.flex_attention import flex_attention_backward

    with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_NPU):
        return flex_attention_backward(*args)


def _register_autocast(module):
    for op, kernel in ((module.flex_attention, _forward_under_autocast),
                       (module.flex_attention_backward, _backward_under_autocast)):
        if not op.has_kernel_for_dispatch_key(DispatchKey.AutocastPrivateUse1):
            op.py_impl(DispatchKey.AutocastPrivateUse1)(kernel)


def install():
    call_after_import("torch.nn.attention.flex_attention", _allow_npu)
    call_after_import("torch._higher_order_ops.flex_attention", _register_autocast)
    call_after_import("torch._dynamo.variables.higher_order_ops", _break_graph_where_inductor_cannot)
