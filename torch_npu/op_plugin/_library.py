"""The ``torch.ops.npu`` library of fused operators, and how each is defined.

Real torch_npu implements these with Ascend kernels (Ascend/op-plugin). Here
each is a composition of ATen operators, registered as
CompositeImplicitAutograd: the same definition then serves every device
(libraries call some of them on CPU tensors), autograd differentiates through
the ATen operators, and FakeTensor / torch.compile trace them without a
separate meta kernel. On npu every ATen operator inside runs asynchronously on
the stream, so a fused op is a short chain of queued kernels; the costly ones
(attention) are built on ATen's fused CPU kernels, not on materialised
intermediates. See docs/fused_ops.md.
"""

import functools
import sys

import torch

from torch_npu import _C, _torch_library

# torch.ops.npu is created by the C++ adaptor (npu_format_cast); add to it.
_LIB = torch.library.Library("npu", "FRAGMENT")

# NNAL's ATB operators live in torch.ops.atb (op-plugin's atb_ops.yaml).
_ATB_LIB = torch.library.Library("atb", "DEF")

# Every operator (overload packet) defined here, in definition order: torch_npu
# re-exports them; torch.ops.npu.<packet> picks the overload from the arguments.
EXPORTED = []
# The same for torch.ops.atb: torch_npu re-exports these too (torch_npu._npu_paged_attention).
EXPORTED_ATB = []
# "npu::<packet>" -> the docstring of the Python function that implements it,
# part of the exported operator's own docstring (export() in __init__.py).
IMPLEMENTATION_DOCS = {}
# "npu::<packet>.<overload>" -> the Python function that implements it, for
# the callers that want the composition itself rather than the operator
# (torch_npu.onnx exports some operators as the ATen operators they compose).
COMPOSITIONS = {}


def _strict_mode_on():
    check_mode = sys.modules.get("torch_npu.npu.check_mode")  # imported after this module
    return check_mode is not None and check_mode._enabled


def _host_only(values):
    """True when `values` (arguments, and lists of them) hold tensors, all on the host."""
    seen = False
    for v in values:
        for t in (v if isinstance(v, (list, tuple)) else (v,)):
            if isinstance(t, torch.Tensor):
                if t.device.type != "cpu":
                    return False
                seen = True
    return seen


def _check_not_all_host(op_name, args, kwargs):
    # Real torch_npu registers its operators for the NPU only, so the
    # dispatcher refuses host tensors. vNPU's compositions run on any device
    # (its tests use them as host references); strict mode refuses as the
    # real one does, so a port finds such calls.
    if _host_only(list(args) + list(kwargs.values())):
        raise NotImplementedError(
            f"Could not run '{op_name}' with arguments from the 'CPU' backend. torch_npu's operators run on npu "
            "tensors only: move the inputs to the NPU first (tensor.npu()).")


_DTENSOR_MODULE = "torch.distributed.tensor"


def _has_dtensor(args, kwargs):
    # DTensor is looked up only once torch.distributed.tensor is imported,
    # so a program that never uses it pays one dictionary lookup per call.
    dtensor = getattr(sys.modules[_DTENSOR_MODULE], "DTensor", None)
    if dtensor is None:  # torch.distributed.tensor is being imported
        return False
    for v in list(args) + list(kwargs.values()):
        for t in (v if isinstance(v, (list, tuple)) else (v,)):
            if isinstance(t, dtensor):
                return True
    return False


def _dtensor_sharding():
    """torch_npu.distributed.tensor's sharding rules (Note in its _sharding module)."""
    from torch_npu.distributed.tensor import _sharding, _rules  # noqa: F401  (registers the rules)
    return _sharding


def _with_capturable_host_constants(fn, op_name):
    """``fn`` with its host copies capturable in an NPU graph: on the device a
    fused op's host arguments (sequence lengths, index lists) are kernel
    arguments fixed at capture; the composition makes small device tensors
    of them (Note in csrc/core/npu_capture.h)."""
    set_capturable = _C._npu_set_host_constants_capturable
    qualified_name = op_name if "." in op_name else op_name + ".default"

    @functools.wraps(fn)
    def impl(*args, **kwargs):
        if _strict_mode_on():
            _check_not_all_host(op_name, args, kwargs)
        if _DTENSOR_MODULE in sys.modules and _has_dtensor(args, kwargs):
            sharding = _dtensor_sharding()
            if sharding.has_rule(qualified_name):
                return sharding.dtensor_call(qualified_name, args, kwargs)
        previous = set_capturable(True)
        try:
            return fn(*args, **kwargs)
        finally:
            set_capturable(previous)
    return impl


def _without_autograd(fn):
    # Autograd's fallback calls a kernel without autograd by redispatching,
    # which leaves grad mode on: the ATen operators of a composition would
    # still record a graph. A kernel on the chip records none.
    @functools.wraps(fn)
    def impl(*args, **kwargs):
        with torch.no_grad():
            return fn(*args, **kwargs)
    return impl


def define(schema, fn, *, export=True, differentiable=True):
    """Defines ``npu::<schema>`` with ``fn`` as its implementation on every device.

    ``differentiable=False`` is for the operators real torch_npu gives no
    backward: ``fn`` then runs below autograd (CompositeExplicitAutograd), so
    autograd treats the operator as torch treats any kernel without an autograd
    formula (``torch._C._set_autograd_fallback_mode``: by default its outputs
    require grad and backward through them warns; in "nothing" mode they do not
    require grad), instead of differentiating through the composition."""
    name = schema.split("(", 1)[0]  # "name" or "name.overload"
    _torch_library.define(_LIB, schema)  # TorchScript's builtin table kept exact
    impl = _with_capturable_host_constants(fn, "npu::" + name)
    if not differentiable:
        impl = _without_autograd(impl)
    _LIB.impl(name, impl, "CompositeImplicitAutograd" if differentiable else "CompositeExplicitAutograd")
    _C._note_op_route("npu::" + name, "python_composite")
    COMPOSITIONS["npu::" + (name if "." in name else name + ".default")] = fn
    packet = name.split(".", 1)[0]
    if export and packet not in EXPORTED:
        EXPORTED.append(packet)
    if fn.__doc__:
        IMPLEMENTATION_DOCS.setdefault("npu::" + packet, fn.__doc__)
    return fn


def define_mutating(schema, fn, inplace_schema, inplace_fn, *, export=True):
    """Defines an operator that writes into its input, real torch_npu's way:
    the functional ``npu::<schema>`` and its in-place ``npu::<inplace_schema>``
    (``scatter_update`` / ``scatter_update_``), each one kernel on every device
    (CompositeExplicitAutograd, no gradient, as op-plugin gives them none).

    Functionalization rewrites the in-place form into the functional one and
    a write-back, as op-plugin's generated Functionalize kernels do, so traced
    and compiled graphs (make_fx, AOTAutograd) hold one ``npu::<name>`` node
    instead of the ATen operators of the composition (Note [Functionalized
    in-place operators])."""
    define(schema, fn, export=export, differentiable=False)
    define(inplace_schema, inplace_fn, export=export, differentiable=False)
    functional = getattr(torch.ops.npu, schema.split("(", 1)[0]).default
    _LIB.impl(inplace_schema.split("(", 1)[0], _functionalized_inplace(functional), "Functionalize")
    return fn


# Note [Functionalized in-place operators]
# Under functionalization (torch.func.functionalize, AOTAutograd, make_fx of a
# functionalized function) an in-place operator reaches its Functionalize
# kernel with FunctionalTensorWrappers. The kernel syncs and unwraps them,
# calls the functional operator below the Functionalize key (so the tracer
# records that one node on the unwrapped tensors), and makes the result the
# new value of the mutated input (replace + commit): the mutation is recorded
# on the wrapper, and functionalization's epilogue writes it back into the
# caller's tensor with one copy_, exactly as for ATen's own in-place ops.
def _functionalized_inplace(functional):
    def kernel(x, *args, **kwargs):
        def unwrap(v):
            if isinstance(v, torch.Tensor) and torch._is_functional_tensor(v):
                torch._sync(v)
                return torch._from_functional_tensor(v)
            return v
        inner_args = [unwrap(a) for a in args]
        inner_kwargs = {k: unwrap(v) for k, v in kwargs.items()}
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Functionalize)):
            result = functional(unwrap(x), *inner_args, **inner_kwargs)
        torch._functionalize_replace(x, result)
        torch._functionalize_commit_update(x)
        torch._functionalize_sync(x)
        return x
    return kernel


def define_atb(schema, fn, *, export=True):
    """Defines ``atb::<schema>`` with ``fn`` as its implementation on every device."""
    name = schema.split("(", 1)[0]
    _ATB_LIB.define(schema)
    _ATB_LIB.impl(name, _with_capturable_host_constants(fn, "atb::" + name), "CompositeImplicitAutograd")
    _C._note_op_route("atb::" + name, "python_composite")
    packet = name.split(".", 1)[0]
    if export and packet not in EXPORTED_ATB:
        EXPORTED_ATB.append(packet)
    if fn.__doc__:
        IMPLEMENTATION_DOCS.setdefault("atb::" + packet, fn.__doc__)
    return fn


def check(cond, message):
    """Raises the RuntimeError torch_npu's argument checks raise."""
    if not cond:
        raise RuntimeError(message)
