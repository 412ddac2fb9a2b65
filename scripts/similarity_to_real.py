#!/usr/bin/env python3
"""How close vNPU's Python files are to real torch_npu's files of the same path.

vNPU reads real torch_npu's code to learn and never copies it; this measures it.

    python scripts/similarity_to_real.py [--base REV] [FILE ...]   (default: the .py files changed since REV, main)

Per file: `same` = share of our non-trivial lines (stripped, > 25 chars) found verbatim in real's file;
`shape` = difflib ratio of the two files' token streams with names, strings and numbers normalized
(a paraphrase with renamed variables scores high). Data-only modules (constants, headers)
are marked, and so are re-export modules (imports, `__all__` and name aliases only: their
content is the list of names the real package exports). A file of 10 or more such lines is flagged `<-- over` when shape > 0.5 or same > 0.2; independently written files score shape
0.1-0.4. White-box tests fix names and signatures, re-export modules are lists of names,
so a flag is a prompt to read both files, not a verdict. Real torch_npu is read from the
bare mirror `fetch` makes (/work/.mirror/Ascend+pytorch/repo).

Some modules of both projects are adaptations of one PyTorch module (torch_npu/npu/_graph_tree.py
of torch/_inductor/cudagraph_trees.py, the rpc options of torch/distributed/rpc/options.py, ...):
PyTorch's code is BSD-licensed and meant to be reused, and two adaptations of it look alike.
`torch` is the shape of our file against that PyTorch module (from the installed torch; the
same path under torch/, torch/cuda/ for torch_npu/npu/, or the ANCESTORS entry); a flagged
file whose `torch` shape is 0.6 or more, or at least its `shape`, is marked `(common ancestor)`:
read it against PyTorch's module, not real torch_npu's.
"""
import ast
import difflib
import importlib.util
import io
import keyword
import os
import subprocess
import sys
import tokenize

R = "/work/.mirror/Ascend+pytorch/repo"
DATA = ("_constant.py", "_csv_headers.py")
# Where the installed torch lives, found without importing it (an import would load torch and,
# through its backend autoload, torch_npu: seconds, for a path).
TORCH = os.path.dirname(os.path.dirname(importlib.util.find_spec("torch").origin))
# Our module -> the PyTorch module it adapts, where the path does not say.
ANCESTORS = {
    "torch_npu/npu/_graph_tree.py": "torch/_inductor/cudagraph_trees.py",
    "torch_npu/npu/mstx.py": "torch/cuda/nvtx.py",
    "torch_npu/utils/_dynamo_device.py": "torch/_dynamo/device_interface.py",
    "torch_npu/utils/collect_env.py": "torch/utils/collect_env.py",
    "torch_npu/npu/_sanitizer.py": "torch/cuda/_sanitizer.py",
    "torch_npu/npu/_memory_viz.py": "torch/cuda/_memory_viz.py",
}


def tokens(src):
    out = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(src).readline):
            if t.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                continue
            if t.type == tokenize.NAME:
                out.append(t.string if keyword.iskeyword(t.string) else "N")
            elif t.type == tokenize.STRING:
                out.append("S")
            elif t.type == tokenize.NUMBER:
                out.append("0")
            else:
                out.append(t.string)
    except (tokenize.TokenError, IndentationError):
        pass
    return out


def strip_docstrings(src):
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body and \
                isinstance(node.body[0], ast.Expr) and isinstance(getattr(node.body[0], "value", None), ast.Constant) \
                and isinstance(node.body[0].value.value, str):
            node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def reexports_only(src):
    """True for a module of imports, `__all__` and plain name aliases only (a package's list of names)."""
    try:
        body = ast.parse(src).body
    except SyntaxError:
        return False

    def plain(node):
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Delete, ast.Pass)):
            return True
        if isinstance(node, ast.Expr):  # the docstring
            return isinstance(node.value, ast.Constant)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            value = node.value
            return isinstance(value, (ast.Name, ast.Attribute, ast.List, ast.Tuple, ast.Constant)) and \
                all(isinstance(e, (ast.Constant, ast.Name, ast.Attribute)) for e in getattr(value, "elts", []))
        return False

    return bool(body) and all(plain(node) for node in body)


def compare(path):
    real = subprocess.run(["git", "--git-dir", R, "show", "HEAD:" + path], capture_output=True, text=True).stdout
    ours = open(path).read() if os.path.exists(path) else ""
    if not real or not ours:
        return None
    rl = set(l.strip() for l in real.splitlines() if len(l.strip()) > 25)
    ol = [l.strip() for l in ours.splitlines() if len(l.strip()) > 25]
    same = sum(l in rl for l in ol) / max(1, len(ol))
    a, b = tokens(strip_docstrings(ours)), tokens(strip_docstrings(real))
    shape = difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() if a and b else 0.0
    return same, shape, len(ol), torch_shape(path, a), reexports_only(ours)


def torch_shape(path, ours_tokens):
    """Shape of our file against the PyTorch module it adapts (0.0 if none)."""
    rel = path[len("torch_npu/"):]
    candidates = [ANCESTORS.get(path), "torch/" + rel]
    if rel.startswith("npu/"):
        candidates.append("torch/cuda/" + rel[len("npu/"):])
    for candidate in filter(None, candidates):
        full = os.path.join(TORCH, candidate)
        if os.path.isfile(full):
            theirs = tokens(strip_docstrings(open(full).read()))
            if theirs and ours_tokens:
                return difflib.SequenceMatcher(None, ours_tokens, theirs, autojunk=False).ratio()
    return 0.0


def main():
    args = sys.argv[1:]
    base = "main"
    if args[:1] == ["--base"]:
        base, args = args[1], args[2:]
    files = args or subprocess.run(["git", "diff", "--name-only", f"{base}...HEAD", "--", "torch_npu"],
                                   capture_output=True, text=True).stdout.split()
    rows = []
    for f in files:
        if f.endswith(".py"):
            r = compare(f)
            if r:
                rows.append((r[1], r[0], r[2], r[3], r[4], f))
    for shape, same, n, torch_ratio, reexports, f in sorted(rows, reverse=True):
        flag = " (data)" if f.endswith(DATA) else " (re-exports)" if reexports else ""
        if not flag and n >= 10 and (shape > 0.5 or same > 0.2):
            flag = " (common ancestor)" if torch_ratio >= min(shape, 0.6) else " <-- over"
        print(f"shape {shape:.2f}  same {same:.2f}  torch {torch_ratio:.2f}  lines {n:4d}  {f}{flag}")


main()
