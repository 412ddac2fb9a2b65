#!/usr/bin/env python3
"""Generates tests/data/torch_npu_signatures.json: the public signatures of
real torch_npu (Ascend/pytorch), read from its source with ``ast``.

tests/test_signatures.py compares vNPU's ``inspect.signature`` of every name
with this table, so that a keyword caller written against real torch_npu
(``get_device_name(device_name=0)``) works here too. The table holds names,
parameter kinds and defaults as source text; none of real torch_npu's code.

Usage (the repository is a git mirror or checkout of Ascend/pytorch; nothing
in it is imported or executed):

    python scripts/gen_signature_table.py --repo /work/.mirror/Ascend+pytorch/repo [--rev HEAD]

Which names are public:
- ``torch.npu``: ``__all__`` of torch_npu/npu/__init__.py;
- ``torch.npu.amp``: ``__all__`` of torch_npu/npu/amp/__init__.py;
- ``torch_npu``: ``__all__`` of torch_npu/__init__.py. Real torch_npu fills
  those names in lazily from a table, ``_LAZY_PYTHON_SYMBOLS`` in
  torch_npu/_init/core/_exports.py (name -> (module, attribute)), which this
  script reads to find each definition. The custom operators torch_npu also
  re-exports (``torch_npu.npu_*``) are defined by Ascend/op-plugin's schema
  YAML, not by Python source here, so they are not in this table.

Each name is followed through ``from .x import y [as z]``, ``from .x import *``
and ``name = other_module.attr`` assignments to the ``def`` or ``class`` that
defines it. A class's signature is its ``__init__`` (else ``__new__``), looked
up through base classes defined in the repository; a name bound to anything
else (an instance, a C extension object) is recorded with its kind and the
source of its value, and has no signature.
"""

import argparse
import ast
import json
import os
import subprocess
import sys

# The modules whose public names are tabled: (vNPU module name, file in the repository).
TABLED_MODULES = (
    ("torch.npu", "torch_npu/npu/__init__.py"),
    ("torch.npu.amp", "torch_npu/npu/amp/__init__.py"),
    ("torch_npu", "torch_npu/__init__.py"),
)
LAZY_EXPORTS_FILE = "torch_npu/_init/core/_exports.py"
MAX_DEPTH = 12  # import chains longer than this are a cycle in our resolution, not in the source

KIND_OF_ARGS = {  # ast argument group -> inspect.Parameter kind name
    "posonlyargs": "POSITIONAL_ONLY",
    "args": "POSITIONAL_OR_KEYWORD",
    "vararg": "VAR_POSITIONAL",
    "kwonlyargs": "KEYWORD_ONLY",
    "kwarg": "VAR_KEYWORD",
}


class Source:
    """Reads and parses files of one revision of the repository (cached)."""

    def __init__(self, repo, rev):
        self.repo = repo
        self.rev = rev
        self._trees = {}

    def commit(self):
        return self._git("rev-parse", self.rev).strip()

    def _git(self, *args):
        return subprocess.run(["git", "-C", self.repo, *args], check=True, capture_output=True,
                              text=True).stdout

    def exists(self, path):
        result = subprocess.run(["git", "-C", self.repo, "cat-file", "-e", f"{self.rev}:{path}"],
                                capture_output=True)
        return result.returncode == 0

    def tree(self, path):
        """(ast.Module, source text) of ``path``, or None if the revision has no such file."""
        if path not in self._trees:
            if not self.exists(path):
                self._trees[path] = None
            else:
                text = self._git("show", f"{self.rev}:{path}")
                self._trees[path] = (ast.parse(text, filename=path), text)
        return self._trees[path]

    def module_file(self, dotted):
        """The file defining module ``dotted`` (a package's __init__.py), or None."""
        base = dotted.replace(".", "/")
        for candidate in (base + ".py", base + "/__init__.py"):
            if self.exists(candidate):
                return candidate
        return None


def module_name_of(path):
    """torch_npu/npu/utils.py -> torch_npu.npu.utils; torch_npu/npu/__init__.py -> torch_npu.npu."""
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def absolute_module(path, node):
    """The absolute module name an ``ImportFrom`` in ``path`` refers to."""
    if node.level == 0:
        return node.module
    package = module_name_of(path).split(".")
    if not path.endswith("__init__.py"):
        package = package[:-1]
    package = package[:len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def top_level_statements(body):
    """Statements at module level, including those inside if/try blocks (the
    usual ``try: import x except ImportError: ...`` and version switches)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from top_level_statements(stmt.body)
            yield from top_level_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from top_level_statements(stmt.body)
            for handler in stmt.handlers:
                yield from top_level_statements(handler.body)
            yield from top_level_statements(stmt.orelse)
            yield from top_level_statements(stmt.finalbody)
        else:
            yield stmt


def module_all(tree):
    """The names in a module's literal ``__all__`` (list or tuple, += included), or None."""
    names = None
    for stmt in top_level_statements(tree.body):
        target, value = None, None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
            target, value = stmt.target, stmt.value
        if isinstance(target, ast.Name) and target.id == "__all__" and isinstance(value, (ast.List, ast.Tuple)):
            found = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            names = (names or []) + found if isinstance(stmt, ast.AugAssign) else found
    return names


def segment(text, node):
    return ast.get_source_segment(text, node) or ast.unparse(node)


def literal(text):
    """The default's value when it is a plain literal (so the test can compare
    values, not spellings: ``2.**16`` and ``65536.0``); else absent."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return {}
    if isinstance(value, tuple):
        value = list(value)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return {}
    return {"value": value}


def parameters(func, text, skip_first):
    """The parameters of a def, in order, as inspect would list them."""
    args = func.args
    params = []
    positional = [(a, "POSITIONAL_ONLY") for a in args.posonlyargs] + \
                 [(a, "POSITIONAL_OR_KEYWORD") for a in args.args]
    first_default = len(positional) - len(args.defaults)
    for i, (arg, kind) in enumerate(positional):
        entry = {"name": arg.arg, "kind": kind}
        if i >= first_default:
            default = segment(text, args.defaults[i - first_default])
            entry.update(default=default, **literal(default))
        params.append(entry)
    if args.vararg:
        params.append({"name": args.vararg.arg, "kind": "VAR_POSITIONAL"})
    for arg, default_node in zip(args.kwonlyargs, args.kw_defaults):
        entry = {"name": arg.arg, "kind": "KEYWORD_ONLY"}
        if default_node is not None:
            default = segment(text, default_node)
            entry.update(default=default, **literal(default))
        params.append(entry)
    if args.kwarg:
        params.append({"name": args.kwarg.arg, "kind": "VAR_KEYWORD"})
    if skip_first and params and params[0]["kind"] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD"):
        params = params[1:]
    return params


class Resolver:
    def __init__(self, source):
        self.source = source

    def find(self, path, name, depth=0):
        """Follows ``name`` in module file ``path`` to its definition.

        Returns (path, node, text) where node is a FunctionDef/ClassDef/Assign
        value, or (path, None, reason) when it cannot be followed.
        """
        if depth > MAX_DEPTH:
            return path, None, "import chain too long"
        parsed = self.source.tree(path)
        if parsed is None:
            return path, None, "file not in the repository"
        tree, text = parsed
        found = None
        star_modules = []
        for stmt in top_level_statements(tree.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == name:
                found = ("def", stmt)
            elif isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                       for t in stmt.targets):
                found = ("assign", stmt.value)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                    and stmt.target.id == name and stmt.value is not None:
                found = ("assign", stmt.value)
            elif isinstance(stmt, ast.ImportFrom):
                module = absolute_module(path, stmt)
                for alias in stmt.names:
                    if alias.name == "*":
                        star_modules.append(module)
                    elif (alias.asname or alias.name) == name:
                        found = ("from", (module, alias.name))
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname == name or (alias.asname is None and alias.name == name):
                        found = ("module", alias.name)
        if found is None:
            for module in star_modules:
                target = self.source.module_file(module)
                if target is None:
                    continue
                exported = module_all(self.source.tree(target)[0])
                if (exported is not None and name not in exported) or (exported is None and name.startswith("_")):
                    continue
                result = self.find(target, name, depth + 1)
                if result[1] is not None:
                    return result
            return path, None, f"no binding of {name} in {path}"
        what, node = found
        if what == "def":
            return path, node, text
        if what == "module":
            return path, ("module", node), text
        if what == "from":
            module, original = node
            target = self.source.module_file(module)
            if target is None:
                # ``from . import mstx`` binds a submodule, not an attribute.
                submodule = self.source.module_file(f"{module}.{original}")
                if submodule is not None:
                    return submodule, ("module", f"{module}.{original}"), text
                return path, None, f"from {module} import {original}: module not in the repository"
            result = self.find(target, original, depth + 1)
            if result[1] is None and self.source.module_file(f"{module}.{original}"):
                return target, ("module", f"{module}.{original}"), text
            return result
        # An assignment: follow plain aliases (x = y, x = module.attr); anything else is a value.
        if isinstance(node, ast.Name):
            return self.find(path, node.id, depth + 1)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner = self.find(path, node.value.id, depth + 1)
            module = owner[1][1] if isinstance(owner[1], tuple) and owner[1][0] == "module" else None
            if owner[1] is None and path.endswith("__init__.py"):
                # `from .x import *` also binds submodule x in its package, without a statement naming it.
                module = f"{module_name_of(path)}.{node.value.id}"
            target = self.source.module_file(module) if module else None
            if target is not None:
                return self.find(target, node.attr, depth + 1)
        return path, ("value", node), text

    def class_signature(self, path, cls, text, depth=0):
        """(parameters, where) of a class's constructor, through bases defined in the repository."""
        for method in ("__init__", "__new__"):
            for stmt in cls.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == method:
                    return parameters(stmt, text, skip_first=True), f"{path}:{stmt.lineno} {cls.name}.{method}"
        if depth > MAX_DEPTH:
            return None, "base class chain too long"
        for base in cls.bases:
            if isinstance(base, ast.Name):
                base_path, node, base_text = self.find(path, base.id)
                if isinstance(node, ast.ClassDef):
                    return self.class_signature(base_path, node, base_text, depth + 1)
            return None, f"constructor inherited from {segment(text, base)}"
        return None, "no constructor defined (object's)"


def describe(resolver, path, name):
    where, node, text = resolver.find(path, name)
    if node is None:
        return {"kind": "unresolved", "reason": text}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        entry = {"kind": "function", "defined_in": f"{where}:{node.lineno}",
                 "parameters": parameters(node, text, skip_first=False)}
        # Only the decorators' names (a decorator may change the signature callers see); their
        # arguments are code of real torch_npu's, which the table does not carry.
        decorators = [segment(text, d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
        if decorators:
            entry["decorators"] = decorators
        return entry
    if isinstance(node, ast.ClassDef):
        params, origin = resolver.class_signature(where, node, text)
        entry = {"kind": "class", "defined_in": f"{where}:{node.lineno}",
                 "bases": [segment(text, b) for b in node.bases]}
        if params is None:
            entry["constructor"] = origin
        else:
            entry.update(parameters=params, constructor=origin)
        return entry
    kind, value = node
    if kind == "module":
        return {"kind": "module", "module": value}
    return {"kind": "value", "defined_in": where, "value": segment(text, value)}


def lazy_exports(source):
    """torch_npu's ``_LAZY_PYTHON_SYMBOLS``: public name -> (module, attribute)."""
    tree, _ = source.tree(LAZY_EXPORTS_FILE)
    for stmt in top_level_statements(tree.body):
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_LAZY_PYTHON_SYMBOLS"
                                                 for t in stmt.targets):
            return ast.literal_eval(stmt.value)
    raise SystemExit(f"{LAZY_EXPORTS_FILE} has no _LAZY_PYTHON_SYMBOLS table: update this script")


def build(source):
    resolver = Resolver(source)
    table = {"source": "https://github.com/Ascend/pytorch", "commit": source.commit(),
             "generated_by": "scripts/gen_signature_table.py", "modules": {}}
    lazy = lazy_exports(source)
    for module, path in TABLED_MODULES:
        tree, _ = source.tree(path)
        names = module_all(tree)
        if names is None:
            raise SystemExit(f"{path} has no literal __all__: update this script")
        entries = {}
        for name in names:
            if module == "torch_npu" and name in lazy:
                target_module, attribute = lazy[name]
                target = source.module_file(target_module)
                entry = describe(resolver, target, attribute)
                entry["lazy_export"] = f"{target_module}.{attribute}"
            else:
                entry = describe(resolver, path, name)
            entries[name] = entry
        table["modules"][module] = {"file": path, "all": names, "names": entries}
    return table


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True, help="a git checkout or mirror of Ascend/pytorch")
    parser.add_argument("--rev", default="HEAD", help="the revision to read (default HEAD)")
    parser.add_argument("--out", default=os.path.join(here, "..", "tests", "data", "torch_npu_signatures.json"))
    args = parser.parse_args(argv)
    table = build(Source(args.repo, args.rev))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(table, f, indent=1, sort_keys=False)
        f.write("\n")
    counts = {m: len(v["names"]) for m, v in table["modules"].items()}
    unresolved = [f"{m}.{n}: {e['reason']}" for m, v in table["modules"].items()
                  for n, e in v["names"].items() if e["kind"] == "unresolved"]
    print(f"{args.out}: {counts} at {table['commit'][:12]}", file=sys.stderr)
    for line in unresolved:
        print(f"  unresolved {line}", file=sys.stderr)


if __name__ == "__main__":
    main()
