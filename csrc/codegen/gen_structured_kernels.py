#!/usr/bin/env python3
"""Generates the npu (PrivateUse1) kernels of ATen's structured ops.

A structured op group (functional `add.Tensor`, inplace `add_.Tensor`, out
`add.out`) shares one TORCH_META_FUNC that infers its outputs. For every such
group with a CPU kernel we emit three wrappers (see EXAMPLE_add.cpp.txt):

  stage 1 (caller thread): common_device(...) checks devices, then the meta
           function runs inside StructuredFunctional/Inplace/Out (structured.h),
           which allocates, checks or resizes the npu outputs;
  stage 2 (stream worker): a lambda that owns snapshots of every argument
           calls at::cpu::<name>_outf / at::cpu::<name>_ on CPU views of the
           device buffers.

Usage:
  gen_structured_kernels.py --output-dir DIR --shards N [--only add,mul]
writes DIR/structured_kernels_{0..N-1}.cpp and DIR/structured_ops.txt (the
registered schema names, one per line).
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field

import torchgen
from torchgen.api import meta, structured
from torchgen.api.translate import translate
from torchgen.api.types import CppSignatureGroup, DispatcherSignature
from torchgen.context import native_function_manager
from torchgen.gen import get_grouped_native_functions, parse_native_yaml
from torchgen.model import (
    DispatchKey,
    NativeFunction,
    NativeFunctionsGroup,
    SchemaKind,
)

# Ops the lead handles by hand (views, special cases) or wants off. Entries are
# either an op base name ("add": its whole group) or a schema name
# ("add_.Tensor": that variant only). Excluded ops are listed in shard 0.
DENY_LIST: set[str] = set()

# Ops that were tried and cannot be generated; name (as DENY_LIST) -> reason.
KNOWN_FAILURES: dict[str, str] = {
    # Their meta function declares an elementwise-shaped output, and the CPU
    # implementation then resizes it to 0-dim for reduction="mean"/"sum"; a
    # view of device memory cannot be resized in stage 2. They run on the
    # synchronous native path instead.
    "mse_loss": "meta shape differs from the final (reduced) shape",
    "smooth_l1_loss": "meta shape differs from the final (reduced) shape",
    # The meta function sizes the result of a scalar's membership test as
    # (0,); the CPU implementation resizes it to 0-dim.
    "isin.Scalar_Tensor": "meta shape differs from the final (0-dim) shape",
    "isin.Scalar_Tensor_out": "meta shape differs from the final (0-dim) shape",
}

# Ops whose `indices` argument real torch_npu accepts in any integer dtype
# (an Ascend chip's max-pool indices are int32): stage 1 widens it to the
# int64 ATen's CPU kernels read (indices_as_int64, structured.h).
INT64_INDICES: set[str] = {
    "adaptive_max_pool2d_backward", "adaptive_max_pool3d_backward", "max_pool2d_with_indices_backward",
}

# Note [Outputs laid out like the input]
# Some CPU implementations restride their output to the input's suggested
# memory format themselves (`output.resize_(output.sizes(),
# input.suggest_memory_format())`, "TODO: move this to TORCH_META_FUNC"),
# after the meta function sized it contiguous. In stage 2 that restrides only
# the kernel's view of the npu output: the kernel would write a channels-last
# layout into a tensor the caller reads as contiguous. For these ops stage 1
# gives the output that layout up front, as the CPU kernel will. Op -> the
# argument whose layout the output takes.
OUTPUT_LAYOUT_OF: dict[str, str] = {
    "replication_pad2d": "self", "replication_pad3d": "self", "reflection_pad3d": "self",
    "reflection_pad3d_backward": "self",
}

# Note [Warnings of a meta function run twice]
# ATen's CPU kernel (at::cpu::<op>_out) runs the meta function again, so a
# warning the meta function gives reaches the user twice: once from stage 1,
# once from stage 2. For these ops stage 2 drops its warnings (their CPU
# kernels give none of their own). Op -> the warning repeated.
QUIET_STAGE_2: dict[str, str] = {
    "index": "indexing with dtype torch.uint8 is now deprecated",
}

# Note [A float32 bias with half matrices]
# torch_npu's addmm takes a float32 self (the bias) with float16 or bfloat16
# matrices (aclnnAddmm), and its result has self's dtype: the product is
# accumulated and returned in float32, not rounded to the matrices' dtype.
# ATen's meta function refuses the mix ("self and mat2 must have the same
# dtype"), so the functional variant redispatches it first with the matrices
# in float32, which computes the same. Op -> the code run before meta.
# Arguments a CPU scalar (a 0-dim CPU tensor) may not be, as CUDA's kernel
# refuses them with these words (PointwiseOpsKernel.cu) and real torch_npu's
# tests expect on npu: op -> [(argument, message tail)], every variant.
CPU_SCALARS_REFUSED: dict[str, list[tuple[str, str]]] = {
    "addcmul": [("self", ""),
                ("tensor1", " However, CPU Scalar support for tensor2 is supported, please swap your tensor1 and "
                            "tensor2 terms.")],
}
BEFORE_META: dict[str, str] = {
    "addmm": ("if (self.scalar_type() == at::kFloat && mat1.scalar_type() == mat2.scalar_type() &&\n"
              "      (mat1.scalar_type() == at::kHalf || mat1.scalar_type() == at::kBFloat16)) {\n"
              "    return at::addmm(self, mat1.to(at::kFloat), mat2.to(at::kFloat), beta, alpha);\n"
              "  }"),
}

TORCH_DIR = os.path.dirname(torchgen.__file__)
YAML_DIR = os.path.join(TORCH_DIR, "packaged", "ATen", "native")
# Installed ATen headers, to check that the headers we include exist.
ATEN_OPS_DIR = os.path.join(
    os.path.dirname(TORCH_DIR), "torch", "include", "ATen", "ops"
)


class Unsupported(Exception):
    """An argument type we don't know how to carry into stage 2."""


# --- arguments: how each dispatcher C++ type travels into stage 2 ------------
#
# The lambda runs later on the stream worker, after the caller's arguments are
# gone, so it captures owning copies: TensorRef snapshots for tensors (through
# the launch's LaunchSnapshot `snap`, which launch() reads), vectors
# for array refs, std::string for string views. SymInts become plain ints: the
# CPU kernel (at::cpu non-symint overload) needs real ints anyway.
#
# type -> (capture initializer, stage-2 expression), "{a}" = argument name,
# "{c}" = its capture (argument name + "_").
BY_VALUE = "{a}", "{c}"
ARG_RULES: dict[str, tuple[str, str]] = {
    # Read-only tensors (TensorRef's read_only: a copy-on-write input stays unmaterialized).
    "const at::Tensor &": ("snap.read({a})", "{c}.view()"),
    "const ::std::optional<at::Tensor> &": ("snap.read({a})", "{c}.optional_view()"),
    "const at::ITensorListRef &": ("snap.reads({a})", "views({c})"),
    "at::TensorList": ("snap.refs({a})", "views({c})"),  # also the C++ type of a mutated list (Tensor(a!)[])
    "const c10::List<::std::optional<at::Tensor>> &": ("snap.reads({a})", "optional_views({c})"),
    "at::IntArrayRef": ("{a}.vec()", "{c}"),
    "c10::SymIntArrayRef": ("C10_AS_INTARRAYREF_SLOW({a}).vec()", "{c}"),
    "c10::SymInt": ("{a}.guard_int(__FILE__, __LINE__)", "{c}"),
    "at::OptionalIntArrayRef": (
        "{a}.has_value() ? std::make_optional({a}->vec()) : std::nullopt",
        "{c} ? at::OptionalIntArrayRef(*{c}) : at::OptionalIntArrayRef()"),
    "at::OptionalSymIntArrayRef": (
        "{a}.has_value() ? std::make_optional(C10_AS_INTARRAYREF_SLOW(*{a}).vec()) : std::nullopt",
        "{c} ? at::OptionalIntArrayRef(*{c}) : at::OptionalIntArrayRef()"),
    "::std::optional<c10::SymInt>": (
        "{a}.has_value() ? std::make_optional({a}->guard_int(__FILE__, __LINE__)) : std::nullopt",
        "{c}"),
    "at::ArrayRef<double>": ("{a}.vec()", "{c}"),
    "c10::string_view": ("std::string({a})", "{c}"),
    "::std::optional<c10::string_view>": (
        "{a}.has_value() ? std::make_optional(std::string(*{a})) : std::nullopt",
        "{c} ? std::optional<c10::string_view>(*{c}) : std::nullopt"),
    **{t: BY_VALUE for t in (
        "const at::Scalar &", "const ::std::optional<at::Scalar> &", "bool", "int64_t",
        "double", "at::ScalarType", "at::Layout", "at::MemoryFormat", "at::Device",
        "::std::optional<double>", "::std::optional<int64_t>", "::std::optional<bool>",
        "::std::optional<at::ScalarType>", "::std::optional<at::Layout>",
        "::std::optional<at::MemoryFormat>", "::std::optional<at::Device>")},
}
# Matrix products: the argument whose last dimension is the contraction
# (Note [The work of a GEMM], csrc/launch/tensor_ref.h).
# Kernels whose functional and out= variants run vNPU's row-split GEMM
# (Note [GEMMs split by rows], csrc/launch/gemm_rows.h).
ROW_SPLIT_GEMMS = {"mm": "torch_npu::gemm_rows::mm_outf", "addmm": "torch_npu::gemm_rows::addmm_outf"}
GEMM_CONTRACTIONS = {"mm": "self", "bmm": "self", "addmm": "mat1", "baddbmm": "batch1", "addbmm": "batch1",
                     "_addmm_activation": "mat1"}
# Note [Operands of one dense layout]
# The meta function of a binary TensorIterator op builds a whole iterator on
# the caller to learn the output's shape, dtype and strides (broadcasting, type
# promotion, memory layout), and the CPU kernel builds it again on the worker.
# For the commonest case, two npu operands of one dtype and one shape, both
# contiguous, the answer is known without it: a contiguous tensor of that
# shape and dtype. These ops skip their meta function then, keeping only its
# argument checks (listed here, ATen/native/BinaryOps.h); a 1K-element add
# spends about a third of its caller time in the iterator otherwise. Only ops
# whose meta is build_borrowing_binary_op qualify (the output dtype is the
# operands' common one, no float promotion).
SAME_LAYOUT_BINARY: dict[str, str] = {
    "add": "at::native::alpha_check(self.scalar_type(), alpha);",
    "sub": "at::native::sub_check(self, other); at::native::alpha_check(self.scalar_type(), alpha);",
    "mul": "",
}
# Arguments common_device() must see (DeviceCheck::add has overloads for these).
TENSOR_LIKE = {
    "const at::Tensor &", "at::Tensor &", "const ::std::optional<at::Tensor> &",
    "const at::ITensorListRef &", "at::TensorList",
    "const c10::List<::std::optional<at::Tensor>> &",
}


@dataclass
class Lambda:
    """Stage 2: captures, local lvalues (mutable tensors) and the CPU call."""
    captures: list[str] = field(default_factory=list)
    locals: list[str] = field(default_factory=list)
    call_args: list[str] = field(default_factory=list)

    def capture(self, name: str, dispatcher_type: str, init_expr: str | None = None) -> None:
        """Captures argument `name`; `init_expr` overrides the value captured."""
        c = name + "_"
        if dispatcher_type == "at::Tensor &":  # mutated (self_ / out): lvalue view
            self.captures.append(f"{c} = snap.ref({init_expr or name})")
            self.locals.append(f"at::Tensor {name} = {c}.view();")
            self.call_args.append(name)
            return
        if dispatcher_type not in ARG_RULES:
            raise Unsupported(f"argument type `{dispatcher_type}` of `{name}`")
        cap, use = ARG_RULES[dispatcher_type]
        self.captures.append(f"{c} = {cap.format(a=init_expr or name)}")
        if dispatcher_type in ("const at::ITensorListRef &", "at::TensorList"):
            # IListRef only borrows: keep the vector of views alive in a local.
            self.locals.append(f"std::vector<at::Tensor> {name} = {use.format(c=c)};")
            self.call_args.append(name)
        else:
            self.call_args.append(use.format(c=c))

    def emit(self, device: str, op: str, call: str, outputs: list[str], contraction: str | None = None,
             quiet: bool = False) -> str:
        """`outputs`: what the kernel writes (poisoned if it fails queued);
        `contraction`: a matrix product's contraction length (Note [The work
        of a GEMM], tensor_ref.h); `quiet`: drop the kernel's warnings (Note
        [Warnings of a meta function run twice])."""
        caps = ",\n          ".join(self.captures)
        body = "".join(f"           {line}\n" for line in self.locals)
        if quiet:
            body += "           c10::WarningUtils::WarningHandlerGuard quiet(dropping_warning_handler());\n"
        note = f"  snap.note_contraction({contraction});\n" if contraction else ""
        return (f"  LaunchSnapshot snap;\n{note}"
                f"  launch({device}, \"{op}\", {{{', '.join(outputs)}}}, snap,\n"
                f"         [{caps}]() {{\n"
                f"{body}"
                f"           {call}({', '.join(self.call_args)});\n"
                f"         }});")


def wrapper_name(f: NativeFunction) -> str:
    return f"wrapper_{f.func.name.unambiguous_name()}"


def gen_variant(g: NativeFunctionsGroup, f: NativeFunction) -> str:
    """The wrapper of one variant (functional, inplace or out) of group g."""
    k = f.func.kind()
    op = str(f.func.name)
    sig = DispatcherSignature.from_schema(f.func)  # exact unboxed dispatcher types
    args = sig.arguments()
    n_out = len(f.func.returns)
    meta_class = f"at::meta::structured_{meta.name(g)}"

    lines = [f"{sig.defn(name=wrapper_name(f))} {{"]
    tensors = [a.name for a in args if a.type in TENSOR_LIKE]
    # Ops declared `device_check: NoCheck` (index with CPU indices, ...)
    # accept CPU tensors next to npu ones, as on CUDA.
    from torchgen.model import DeviceCheckType
    check = "common_device_allowing_cpu" if f.device_check == DeviceCheckType.NoCheck else "common_device"
    if k is SchemaKind.out:  # torch_npu's words for an `out=` tensor off the npu
        lines.extend(f"  check_output_on_npu({a.name});" for a in f.func.arguments.out)
    lines.append(f"  const c10::DeviceIndex device = {check}(\"{op}\", {', '.join(tensors)});")
    for arg, tail in CPU_SCALARS_REFUSED.get(str(g.functional.func.name.name), []):
        base_name = str(g.functional.func.name.name)
        lines.append(f"  TORCH_CHECK(!({arg}.device().is_cpu() && {arg}.dim() == 0), \"CPU Scalar support for {arg} "
                     f"argument is not supported when calling {base_name} on NPU tensors.{tail}\");")
    # An argument replaced by a converted value, for meta and stage 2.
    replaced: dict[str, str] = {}
    if str(g.functional.func.name.name) in INT64_INDICES:
        lines.append("  const at::Tensor indices_int64 = indices_as_int64(indices);")
        replaced["indices"] = "indices_int64"

    if k is SchemaKind.functional and str(g.functional.func.name.name) in BEFORE_META:
        lines.append("  " + BEFORE_META[str(g.functional.func.name.name)])
    base = str(g.functional.func.name.name)
    one_dense_layout = k is SchemaKind.functional and base in SAME_LAYOUT_BINARY
    if one_dense_layout:
        # Note [Operands of one dense layout]: the structured class (a
        # TensorIterator) is only made when the meta function runs: made and
        # destroyed unused, it took 5% of the adaptor's host time for a
        # 1K-element add (perf).
        lines.append(f"  struct {{ std::array<at::Tensor, {n_out}> outputs_; }} op;")
    elif k is SchemaKind.functional:
        lines.append(f"  StructuredFunctional<{meta_class}, {n_out}> op(device);")
    else:
        outs = [f.func.arguments.self_arg.argument.name] if k is SchemaKind.inplace \
            else [a.name for a in f.func.arguments.out]
        refs = ", ".join(f"std::cref({o})" for o in outs)
        cls = "StructuredInplace" if k is SchemaKind.inplace else "StructuredOut"
        lines.append(f"  {cls}<{meta_class}, {n_out}> op({{{refs}}});")

    # Meta takes the functional's non-out args in structured types (ints, not
    # SymInts; const refs): let torchgen's translate() convert, as
    # RegisterDispatchKey.py does. Precomputed values returned by the meta of
    # some ops are not needed: the at::cpu call below recomputes them.
    meta_exprs = ", ".join(
        replaced.get(e.expr, e.expr) for e in translate(args, structured.meta_arguments(g), method=False))
    discard = "(void)" if g.out.precomputed else ""
    if one_dense_layout:
        # Note [Operands of one dense layout]
        checks = SAME_LAYOUT_BINARY[base]
        lines.append("  if (operands_of_one_dense_layout(self, other)) {")
        if checks:
            lines.append(f"    {checks}")
        lines.append("    op.outputs_[0] = empty_npu(self.sizes(), {}, self.options(), device);")
        lines.append("  } else {")
        lines.append(f"    StructuredFunctional<{meta_class}, {n_out}> meta_op(device);")
        lines.append(f"    with_op_parameter_errors([&] {{ {discard}meta_op.meta({meta_exprs}); }});")
        lines.append("    op.outputs_ = std::move(meta_op.outputs_);")
        lines.append("  }")
    else:
        lines.append(f"  with_op_parameter_errors([&] {{ {discard}op.meta({meta_exprs}); }});")

    layout_of = OUTPUT_LAYOUT_OF.get(base)
    if layout_of is not None and k is not SchemaKind.inplace:
        # Note [Outputs laid out like the input]
        target = "op.outputs_[0]" if k is SchemaKind.functional else f.func.arguments.out[0].name
        lines.append(f"  restride_like({target}, {layout_of});")

    # Stage 2. Captures are initialized here, after meta (it may resize out=).
    lam = Lambda()
    if k is SchemaKind.inplace:
        cpu_sig = CppSignatureGroup.from_native_function(
            f, method=False, fallback_binding=False).most_faithful_signature()
        for a in args:
            lam.capture(a.name, a.type)
    else:
        # Functional and out both run the CPU out= kernel, args in schema order.
        cpu_sig = CppSignatureGroup.from_native_function(
            g.out, method=False, fallback_binding=False).most_faithful_signature()
        for a in args:
            lam.capture(a.name, a.type, replaced.get(a.name))
        if k is SchemaKind.functional:  # the outputs meta just allocated
            for i in range(n_out):
                lam.capture(f"out{i}", "at::Tensor &", f"op.outputs_[{i}]")
    if k is SchemaKind.functional:
        written = [f"op.outputs_[{i}]" for i in range(n_out)]
    elif k is SchemaKind.inplace:
        written = [f.func.arguments.self_arg.argument.name]
    else:
        written = [a.name for a in f.func.arguments.out]
    gemm = GEMM_CONTRACTIONS.get(str(g.functional.func.name.name))
    kernel = f"at::cpu::{cpu_sig.name()}"
    if k is not SchemaKind.inplace:
        kernel = ROW_SPLIT_GEMMS.get(str(g.functional.func.name.name), kernel)
    lines.append(lam.emit("device", op, kernel, written,
                          f"{gemm}.size(-1)" if gemm else None, quiet=base in QUIET_STAGE_2))

    if k is SchemaKind.functional:
        moved = [f"std::move(op.outputs_[{i}])" for i in range(n_out)]
        lines.append(f"  return {moved[0]};" if n_out == 1
                     else f"  return std::make_tuple({', '.join(moved)});")
    elif k is SchemaKind.inplace:
        lines.append(f"  return {f.func.arguments.self_arg.argument.name};")
    else:
        outs = [a.name for a in f.func.arguments.out]
        lines.append(f"  return {outs[0]};" if n_out == 1
                     else f"  return std::forward_as_tuple({', '.join(outs)});")
    lines.append("}\n")
    return "\n".join(lines)


@dataclass
class GroupCode:
    headers: list[str]
    wrappers: list[str]
    registrations: list[tuple[str, str]]  # (schema name, wrapper name)


def exclusion(name: str) -> str | None:
    """Why `name` (op base name or schema name) is excluded, if it is."""
    if name in DENY_LIST:
        return "deny-listed"
    return KNOWN_FAILURES.get(name)


def gen_group(g: NativeFunctionsGroup, denied: list[tuple[str, str]]) -> GroupCode | None:
    """All allowed variants of g, or None (reason appended to `denied`)."""
    base = str(g.functional.func.name.name.base)
    root = g.functional.root_name
    if why := exclusion(base):
        denied.append((base, why))
        return None
    if any(a.type.is_generator_like() for f in g.functions() for a in f.func.arguments.flat_all):
        denied.append((base, "takes a Generator (randomness not supported yet)"))
        return None
    headers = [f"ATen/ops/{root}_meta.h", f"ATen/ops/{root}_cpu_dispatch.h"]
    missing = [h for h in headers if not os.path.exists(os.path.join(ATEN_OPS_DIR, h[9:]))]
    if missing:
        denied.append((base, f"missing header {missing[0]}"))
        return None
    if str(g.functional.func.name.name) in SAME_LAYOUT_BINARY:
        headers.append("ATen/native/BinaryOps.h")  # the checks of Note [Operands of one dense layout]

    code = GroupCode(headers, [], [])
    # (No structured group has a `mutable` variant; torchgen rejects those.)
    variants = [g.functional] + ([g.inplace] if g.inplace else []) + [g.out]
    for f in variants:
        if why := exclusion(str(f.func.name)):
            denied.append((str(f.func.name), why))
            continue
        with native_function_manager(f):
            try:
                code.wrappers.append(gen_variant(g, f))
            except Unsupported as e:
                denied.append((base, f"unsupported {e}"))
                return None
        code.registrations.append((str(f.func.name), wrapper_name(f)))
    return code


def structured_groups() -> list[NativeFunctionsGroup]:
    """Structured groups whose out= variant has a CPU kernel."""
    parsed = parse_native_yaml(os.path.join(YAML_DIR, "native_functions.yaml"),
                               os.path.join(YAML_DIR, "tags.yaml"))
    cpu = parsed.backend_indices[DispatchKey.CPU]
    return [g for g in get_grouped_native_functions(parsed.native_functions)
            if isinstance(g, NativeFunctionsGroup) and g.structured
            and cpu.has_kernel(g.out)]


def render_shard(groups: list[GroupCode], excluded: list[tuple[str, str]] | None) -> str:
    out = ["// @generated by csrc/codegen/gen_structured_kernels.py; do not edit.",
           "// npu kernels of ATen's structured ops: meta on the caller thread,",
           "// at::cpu kernel on CPU views of the device memory in stage 2."]
    if excluded is not None:
        out.append("//\n// Structured ops NOT generated (registered nowhere by this file set):")
        out += [f"//   {name}: {why}" for name, why in excluded] or ["//   (none)"]
    out.append("")
    # structured.h first: the per-op *_cpu_dispatch.h headers only include
    # ATen_fwd.h and need complete types (OptionalArrayRef, Tensor) before them.
    out += ['#include "csrc/core/npu_error.h"', '#include "csrc/launch/gemm_rows.h"', '#include "csrc/launch/structured.h"', "", "#include <c10/util/OptionalArrayRef.h>",
            "#include <torch/library.h>", ""]
    # Narrow per-op headers only: these TUs are big, <ATen/ATen.h> would double them.
    out += [f"#include <{h}>" for h in sorted({h for gc in groups for h in gc.headers})]
    out += ["", "#include <optional>", "#include <string>", "#include <tuple>",
            "#include <vector>", "", "namespace torch_npu::generated {", "namespace {", ""]
    for gc in groups:
        out += gc.wrappers
    out += ["}  // namespace", "", "TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {"]
    out += [f'  register_kernel(m, "{op}", {w});' for gc in groups for op, w in gc.registrations]
    out += ["}", "", "}  // namespace torch_npu::generated", ""]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output-dir", required=True)
    ap.add_argument("--shards", type=int, required=True)
    ap.add_argument("--only", default="", help="comma-separated op base names (for testing)")
    args = ap.parse_args()
    only = {s for s in args.only.split(",") if s}

    denied: list[tuple[str, str]] = []
    generated: list[GroupCode] = []
    for g in structured_groups():
        if only and str(g.functional.func.name.name.base) not in only:
            continue
        gc = gen_group(g, denied)
        if gc is not None and gc.registrations:
            generated.append(gc)

    # Round-robin keeps shards about the same size, so they compile in parallel.
    shards: list[list[GroupCode]] = [generated[i::args.shards] for i in range(args.shards)]
    os.makedirs(args.output_dir, exist_ok=True)
    for i, shard in enumerate(shards):
        text = render_shard(shard, denied if i == 0 else None)
        path = os.path.join(args.output_dir, f"structured_kernels_{i}.cpp")
        # Leave unchanged files alone so the build does not recompile them.
        if not os.path.exists(path) or open(path).read() != text:
            with open(path, "w") as fh:
                fh.write(text)
    with open(os.path.join(args.output_dir, "structured_ops.txt"), "w") as fh:
        fh.writelines(f"{op}\n" for gc in generated for op, _ in gc.registrations)
    n_variants = sum(len(gc.registrations) for gc in generated)
    print(f"{len(generated)} groups, {n_variants} kernels, {len(denied)} excluded "
          f"-> {args.output_dir} ({args.shards} shards)")


if __name__ == "__main__":
    main()
