"""Writes torch_npu/op_plugin/_manifest.py: the fused operators torch_npu
declares at import before their family module is imported (Note [Operators
declared before their family] in torch_npu/op_plugin/_library.py).

    python scripts/gen_op_manifest.py [--check]

It imports torch_npu without a manifest, so every family defines its own
operators, and lists the operators of each family whose import does nothing
but define operators. A family stays imported with torch_npu (EAGER_FAMILIES)
when its module does anything else at its top level (registers a
Functionalize kernel or an autograd formula, overrides an ATen kernel, calls
a torch function), judged from its source, or when one of its operators'
functions is not a module attribute the manifest can name. Run it after
adding, removing or changing a fused operator; tests/test_op_manifest.py
fails until it is run.

--check compares instead of writing: exit status 1 when the file differs.
"""

import argparse
import ast
import importlib
import inspect
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = os.path.join(ROOT, "torch_npu", "op_plugin", "_manifest.py")

# What a family's top level may do and still be imported at first use:
# define its operators, and build plain values (a call of a name defined or
# imported in the module, a class of its own, a few constructors of plain
# values, a string's own methods).
_DEFINERS = {"define", "define_atb", "define_mutating", "define_functionalization"}
_PLAIN_ATTRIBUTE_CALLS = {"torch.device", "collections.namedtuple", "struct.Struct"}
_STRING_METHODS = {"format", "join", "replace"}


def _plain_call(call):
    func = call.func
    if not isinstance(func, ast.Attribute):
        return True
    if ast.unparse(func) in _PLAIN_ATTRIBUTE_CALLS:
        return True
    return func.attr in _STRING_METHODS and isinstance(func.value, (ast.Name, ast.Constant))


def _only_plain_calls(node):
    return all(_plain_call(n) for n in ast.walk(node) if isinstance(n, ast.Call))


def _defines_only(statement):
    if isinstance(statement, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Delete)):
        return not getattr(statement, "decorator_list", None)
    if isinstance(statement, ast.Expr):
        value = statement.value
        if isinstance(value, ast.Constant):  # docstring
            return True
        return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _DEFINERS \
            and all(_only_plain_calls(a) for a in value.args)
    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
        return statement.value is None or _only_plain_calls(statement.value)
    if isinstance(statement, ast.For):
        return _only_plain_calls(statement.iter) and all(_defines_only(s) for s in statement.body) \
            and not statement.orelse
    return False


def why_eager(module, kernels):
    """Why the family must be imported with torch_npu, or None."""
    tree = ast.parse(inspect.getsource(module))
    for statement in tree.body:
        if not _defines_only(statement):
            return f"line {statement.lineno}: {ast.unparse(statement).splitlines()[0][:80]}"
    for kernel in kernels:
        fn = kernel.fn
        if fn is not None and function_name(module, fn) is None:
            return f"{kernel.op_name}'s function ({fn.__name__}) is not an attribute of the module"
    return None


def function_name(module, fn):
    """The name the family module holds ``fn`` under, or None."""
    if getattr(module, fn.__name__, None) is fn:
        return fn.__name__
    return next((name for name, value in vars(module).items() if value is fn), None)


def _text_block(name, rows):
    """``NAME = \"\"\"...\"\"\"``: one tab-separated line per row (fields free of tabs, newlines,
    backslashes and triple quotes)."""
    block = [f'{name} = """\\']
    for fields in rows:
        assert not any("\t" in f or "\n" in f or '"""' in f or "\\" in f for f in fields), fields
        block.append("\t".join(fields))
    return block + ['"""']


def render():
    sys.modules["torch_npu.op_plugin._manifest"] = None  # every family defines its own operators
    import torch  # noqa: F401  (autoloads torch_npu)
    from torch_npu import op_plugin
    from torch_npu.op_plugin import _library

    by_family = {family: [] for family in op_plugin.FAMILIES}
    for kernel in [*_library.KERNELS.values(), *_library.FUNCTIONALIZATIONS.values()]:
        by_family[kernel.family].append(kernel)
    declared, eager = [], []
    for family in op_plugin.FAMILIES:
        module = importlib.import_module(f"torch_npu.op_plugin.{family}")
        if why_eager(module, by_family[family]) is None:
            declared.append(family)
        else:
            eager.append(family)
    lines = [
        '"""The fused operators torch_npu declares before importing their family',
        "(Note [Operators declared before their family] in _library.py).",
        "",
        "Generated by scripts/gen_op_manifest.py from the families; do not edit.",
        '"""',
        "",
        "# The families imported with torch_npu, in this order: each registers more than its operators.",
        f"EAGER_FAMILIES = {tuple(eager)!r}",
        "",
        "# torch_npu.<name> for each operator packet, in definition order.",
        "EXPORTED = (",
        *(f"    {name!r}," for name in _library.EXPORTED),
        ")",
        "EXPORTED_ATB = (",
        *(f"    {name!r}," for name in _library.EXPORTED_ATB),
        ")",
        "",
        "# Each operator of the other families, one line each: namespace, schema, family, function and",
        "# differentiable (1 or 0), tab-separated. One string rather than a tuple per operator: torch_npu's",
        "# import keeps nothing of it but the kernels it declares.",
    ]
    declared_rows = []
    for kernel in _library.KERNELS.values():
        if kernel.family in declared:
            module = sys.modules[f"torch_npu.op_plugin.{kernel.family}"]
            declared_rows.append((kernel.op_name.split("::", 1)[0], kernel.schema, kernel.family,
                                  function_name(module, kernel.fn), "0" if kernel.no_grad else "1"))
    lines += _text_block("DECLARED", declared_rows)
    lines += [
        "",
        "# The Functionalize kernel of each in-place operator of those families, one line each: operator,",
        "# family, and the family's function or (define_mutating's generic kernel) the functional operator.",
    ]
    functionalized_rows = []
    for kernel in _library.FUNCTIONALIZATIONS.values():
        if kernel.family in declared:
            module = sys.modules[f"torch_npu.op_plugin.{kernel.family}"]
            function = function_name(module, kernel.fn) if kernel.fn is not None else ""
            functionalized_rows.append((kernel.op_name.split("::", 1)[1], kernel.family, function,
                                        kernel.functional or ""))
    lines += _text_block("FUNCTIONALIZED", functionalized_rows)
    return "\n".join(lines) + "\n", eager, declared


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true", help="exit 1 if the manifest is out of date")
    args = parser.parse_args()
    text, eager, declared = render()
    current = open(MANIFEST).read() if os.path.exists(MANIFEST) else None
    if args.check:
        if current != text:
            print(f"{MANIFEST} is out of date: run `python scripts/gen_op_manifest.py`")
            return 1
        return 0
    with open(MANIFEST, "w") as f:
        f.write(text)
    print(f"wrote {MANIFEST}: {len(declared)} families declared, {len(eager)} imported with torch_npu "
          f"({', '.join(eager)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
