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

Most families are imported at the first call of one of their operators, not
with torch_npu (Note [Operators declared before their family]).
"""

import importlib
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
# "npu::<packet>.<overload>" -> the _Kernel registered for it, in definition
# order; its function is what callers that want the composition itself rather
# than the operator use (composition(): torch_npu.onnx exports some operators
# as the ATen operators they compose).
KERNELS = {}


# Note [Operators declared before their family]
# Importing the ~40 family modules is most of what the fused operators cost
# at import (their ~1200 functions and code objects, about half the objects
# torch_npu's import leaves behind, which brings forward the full garbage
# collection `import torch` leaves pending; issue 28, item 0). So
# op_plugin/_manifest.py, generated from the families by
# scripts/gen_op_manifest.py, lists each operator of the families whose import
# does nothing but define operators: its schema, family and function.
# torch_npu's import declares those operators from it: schema and kernel are
# registered as define() registers them, but the kernel's function is found at
# its first call, by importing the family, whose define() calls then hand the
# declared kernels their functions. Schemas, TorchScript, FakeTensor and
# torch.compile see the operator before its family is imported, as they do
# any registered operator. The Functionalize kernels of their in-place
# operators are declared the same way (define_mutating,
# define_functionalization). Families that register anything else (an
# autograd formula, an ATen override) are imported with torch_npu, and without
# the manifest every family is. tests/test_op_manifest.py checks the manifest
# against the families.


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


class _Kernel:
    """The kernel registered for one fused operator: its function with the
    host copies capturable in an NPU graph. On the device a fused op's host
    arguments (sequence lengths, index lists) are kernel arguments fixed at
    capture; the composition makes small device tensors of them (Note in
    csrc/core/npu_capture.h). Also refuses host tensors in strict mode, and
    hands DTensor arguments to torch_npu's sharding rules.

    One slotted object per operator rather than a closure made by
    functools.wraps (a function, its cells and a __dict__): every object
    torch_npu's import leaves behind brings Python's next full garbage
    collection closer. ``fn`` is None until the family is imported (Note
    [Operators declared before their family])."""

    __slots__ = ("fn", "op_name", "qualified_name", "schema", "no_grad", "family", "__name__", "__qualname__")

    def __init__(self, fn, op_name, schema, no_grad, family, fn_name):
        self.fn = fn
        self.op_name = op_name
        self.qualified_name = op_name if "." in op_name else op_name + ".default"
        self.schema = schema  # as written in the family, for the manifest
        # Autograd's fallback calls a kernel without autograd by redispatching,
        # which leaves grad mode on: the ATen operators of a composition would
        # still record a graph. A kernel on the chip records none.
        self.no_grad = no_grad
        self.family = family  # "norm" for torch_npu.op_plugin.norm
        self.__name__ = self.__qualname__ = fn_name

    @property
    def __wrapped__(self):
        return self.function()

    def function(self):
        """The Python function that implements the operator, its family imported if need be."""
        if self.fn is None:
            _import_family(self, f"{self.op_name} is declared by torch_npu/op_plugin/_manifest.py as an operator "
                                 f"of {__package__}.{self.family}, which does not define it")
        return self.fn

    def __call__(self, *args, **kwargs):
        if self.no_grad:
            with torch.no_grad():
                return self._run(args, kwargs)
        return self._run(args, kwargs)

    def _run(self, args, kwargs):
        if _strict_mode_on():
            _check_not_all_host(self.op_name, args, kwargs)
        if _DTENSOR_MODULE in sys.modules and _has_dtensor(args, kwargs):
            sharding = _dtensor_sharding()
            if sharding.has_rule(self.qualified_name):
                return sharding.dtensor_call(self.qualified_name, args, kwargs)
        fn = self.fn if self.fn is not None else self.function()
        previous = _C._npu_set_host_constants_capturable(True)
        try:
            return fn(*args, **kwargs)
        finally:
            _C._npu_set_host_constants_capturable(previous)

    def __repr__(self):
        return f"<kernel of {self.op_name}: {self.fn!r}>"


def _import_family(kernel, missing):
    """Imports ``kernel``'s family, whose definitions hand the kernel its function;
    ``missing`` says what is wrong when they do not."""
    importlib.import_module(f"{__package__}.{kernel.family}")
    if kernel.fn is None:
        raise RuntimeError(f"{missing}: the manifest is out of date; run `python scripts/gen_op_manifest.py`.")


def _family_of_caller():
    """The family (``norm``, ``atb._atb_ops``) whose module called define()."""
    frame = sys._getframe(1)
    while frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return frame.f_globals["__name__"][len(__package__) + 1:]


def _register(lib, schema, kernel, dispatch_key):
    name = schema.split("(", 1)[0]  # "name" or "name.overload"
    if lib is _LIB:
        _torch_library.define(lib, schema)  # TorchScript's builtin table kept exact
    else:
        lib.define(schema)
    lib.impl(name, kernel, dispatch_key)
    _C._note_op_route(kernel.op_name, "python_composite")
    KERNELS[kernel.qualified_name] = kernel


def _define(lib, schema, fn, export, differentiable):
    namespace = lib.ns
    name = schema.split("(", 1)[0]
    op_name = f"{namespace}::{name}"
    kernel = KERNELS.get(op_name if "." in name else op_name + ".default")
    if kernel is None:
        kernel = _Kernel(fn, op_name, schema, not differentiable, _family_of_caller(), fn.__name__)
        _register(lib, schema, kernel, "CompositeImplicitAutograd" if differentiable else "CompositeExplicitAutograd")
    elif kernel.fn is None and kernel.schema == schema and kernel.no_grad == (not differentiable):
        kernel.fn = fn  # declared from the manifest; its family is being imported now
    else:
        raise RuntimeError(
            f"{op_name} is defined twice, or differently from torch_npu/op_plugin/_manifest.py "
            f"(there: {kernel.schema!r}, differentiable={not kernel.no_grad}); if the family changed, run "
            "`python scripts/gen_op_manifest.py`.")
    packet = name.split(".", 1)[0]
    exported = EXPORTED if lib is _LIB else EXPORTED_ATB
    if export and packet not in exported:
        exported.append(packet)
    if fn.__doc__:
        IMPLEMENTATION_DOCS.setdefault(f"{namespace}::{packet}", fn.__doc__)
    return fn


def declare(namespace, schema, family, fn_name, differentiable):
    """Registers an operator of the manifest, its function left to its family
    (Note [Operators declared before their family])."""
    lib = _LIB if namespace == "npu" else _ATB_LIB
    name = schema.split("(", 1)[0]
    kernel = _Kernel(None, f"{namespace}::{name}", schema, not differentiable, family, fn_name)
    _register(lib, schema, kernel, "CompositeImplicitAutograd" if differentiable else "CompositeExplicitAutograd")


def composition(qualified_name):
    """The Python function of ``"npu::<packet>.<overload>"``, its family imported if need be."""
    return KERNELS[qualified_name].function()


def implementation_doc(namespace, packet):
    """The docstring of the function implementing ``<namespace>::<packet>`` (its first overload's), or None."""
    prefix = f"{namespace}::{packet}."
    for qualified_name, kernel in KERNELS.items():
        if qualified_name.startswith(prefix):
            kernel.function()
            break
    return IMPLEMENTATION_DOCS.get(f"{namespace}::{packet}")


def define(schema, fn, *, export=True, differentiable=True):
    """Defines ``npu::<schema>`` with ``fn`` as its implementation on every device.

    ``differentiable=False`` is for the operators real torch_npu gives no
    backward: ``fn`` then runs below autograd (CompositeExplicitAutograd), so
    autograd treats the operator as torch treats any kernel without an autograd
    formula (``torch._C._set_autograd_fallback_mode``: by default its outputs
    require grad and backward through them warns; in "nothing" mode they do not
    require grad), instead of differentiating through the composition."""
    return _define(_LIB, schema, fn, export, differentiable)


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
    inplace = inplace_schema.split("(", 1)[0]
    _functionalize(_Functionalization("npu::" + inplace, _family_of_caller(), functional=schema.split("(", 1)[0]))
    return fn


def define_functionalization(name, fn):
    """Registers ``fn`` as the Functionalize kernel of the in-place operator
    ``npu::<name>``, for an operator whose write-back define_mutating's
    generic kernel does not express (several mutated inputs, say)."""
    _functionalize(_Functionalization("npu::" + name, _family_of_caller(), fn=fn, fn_name=fn.__name__))
    return fn


def declare_functionalization(name, family, fn_name, functional):
    """Registers a Functionalize kernel of the manifest: the generic one when
    ``functional`` names the functional operator, else the family's
    ``fn_name``, found at its first call."""
    _functionalize(_Functionalization("npu::" + name, family, fn_name=fn_name or None, functional=functional or None))


# "npu::<name>" -> the Functionalize kernel registered for the in-place operator, in registration order.
FUNCTIONALIZATIONS = {}


class _Functionalization:
    """The Functionalize kernel of an in-place operator: define_mutating's
    generic kernel over the functional operator ``functional``, or a family's
    own function (``fn``, None until the family is imported when declared
    from the manifest)."""

    __slots__ = ("op_name", "family", "fn", "fn_name", "functional")

    def __init__(self, op_name, family, fn=None, fn_name=None, functional=None):
        self.op_name = op_name
        self.family = family
        self.fn = fn
        self.fn_name = fn_name
        self.functional = functional

    def __call__(self, *args, **kwargs):
        if self.functional is not None:
            return _functionalized_inplace(getattr(torch.ops.npu, self.functional).default, *args, **kwargs)
        if self.fn is None:
            _import_family(self, f"{self.op_name}'s Functionalize kernel is declared by "
                                 f"torch_npu/op_plugin/_manifest.py as {__package__}.{self.family}.{self.fn_name}, "
                                 "which does not register it")
        return self.fn(*args, **kwargs)


def _functionalize(kernel):
    declared = FUNCTIONALIZATIONS.get(kernel.op_name)
    if declared is None:
        _LIB.impl(kernel.op_name.split("::", 1)[1], kernel, "Functionalize")
        FUNCTIONALIZATIONS[kernel.op_name] = kernel
    elif declared.fn is None and declared.functional == kernel.functional and declared.fn_name == kernel.fn_name:
        declared.fn = kernel.fn  # declared from the manifest; its family is being imported now
    else:
        raise RuntimeError(
            f"{kernel.op_name}'s Functionalize kernel is registered twice, or differently from "
            "torch_npu/op_plugin/_manifest.py; if the family changed, run `python scripts/gen_op_manifest.py`.")


# Note [Functionalized in-place operators]
# Under functionalization (torch.func.functionalize, AOTAutograd, make_fx of a
# functionalized function) an in-place operator reaches its Functionalize
# kernel with FunctionalTensorWrappers. The kernel syncs and unwraps them,
# calls the functional operator below the Functionalize key (so the tracer
# records that one node on the unwrapped tensors), and makes the result the
# new value of the mutated input (replace + commit): the mutation is recorded
# on the wrapper, and functionalization's epilogue writes it back into the
# caller's tensor with one copy_, exactly as for ATen's own in-place ops.
def _functionalized_inplace(functional, x, *args, **kwargs):
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


def define_atb(schema, fn, *, export=True):
    """Defines ``atb::<schema>`` with ``fn`` as its implementation on every device."""
    return _define(_ATB_LIB, schema, fn, export, differentiable=True)


def check(cond, message):
    """Raises the RuntimeError torch_npu's argument checks raise."""
    if not cond:
        raise RuntimeError(message)
