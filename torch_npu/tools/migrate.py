"""cuda -> npu source migration, by the syntax tree (not text replacement).

    python -m torch_npu.tools.migrate SRC [-o DST] [--dry-run] [--report FILE] [--quiet]

SRC is a Python file or a tree. Without -o the files are rewritten in
place. --dry-run writes nothing and prints a unified diff. --report writes
every change and every API without an npu counterpart, as Markdown (.md),
JSON (.json), or both (any other name: FILE.md and FILE.json).

What is rewritten (everything else is left as it is, comments and strings
that merely contain "cuda" included):
- ``torch.cuda`` -> ``torch.npu`` in expressions and imports (torch.cuda.amp,
  torch.cuda.synchronize, ``from torch.cuda import ...``);
- ``x.cuda(...)`` -> ``x.npu(...)``, ``x.is_cuda`` -> ``x.is_npu``;
- device strings: ``"cuda"``, ``"cuda:N"`` and f-strings starting ``f"cuda:"``
  (``torch.device("cuda")``, ``device="cuda"``, ``map_location``,
  ``device_type``, ``pin_memory_device``, comparisons);
- ``"nccl"`` -> ``"hccl"`` as a process-group backend;
- ``"CUDA_VISIBLE_DEVICES"`` -> ``"ASCEND_RT_VISIBLE_DEVICES"``;
- ``torch.backends.cudnn`` settings: ``deterministic = X`` ->
  ``torch.use_deterministic_algorithms(X)``, ``allow_tf32 = X`` (and
  ``torch.backends.cuda.matmul.allow_tf32``) -> ``torch.npu.matmul.allow_hf32
  = X``, ``benchmark`` / ``enabled`` -> ``pass`` with a note (no npu
  counterpart);
- ``import torch_npu`` is added after ``import torch`` in changed files.

Reported as having no npu counterpart (with a replacement where one exists):
torch.cuda.nvtx, custom CUDA extensions (CUDAExtension, load/load_inline
with .cu sources, .cu/.cuh files in the tree), cupy, pycuda, apex,
flash_attn, bitsandbytes, xformers, triton, nvidia.dali, ...

The code read is never imported or executed. Output files are written to a
temporary name and renamed, so a user's file is never left half written.
"""

import argparse
import ast
import contextlib
import difflib
import gc
import io
import json
import os
import pathlib
import re
import shutil
import sys
import tokenize
from dataclasses import asdict, dataclass, field

__all__ = ["Change", "Finding", "MigrationReport", "ModelMigrator", "main", "migrate_path", "migrate_source",
           "write_report"]

_DEVICE = re.compile(r"^cuda(:\d+)?$")
_BACKEND_CALLS = {"init_process_group", "new_group", "new_subgroups", "init_device_mesh", "Backend"}

# module prefix -> (what it is, suggested replacement or "")
UNSUPPORTED_MODULES = {
    "torch.cuda.nvtx": ("NVTX ranges (CUDA only)", "torch.autograd.profiler.record_function, or "
                                                  "torch_npu.profiler for device timelines"),
    "cupy": ("CuPy arrays (CUDA only)", "torch tensors on npu, or numpy on the host"),
    "pycuda": ("PyCUDA (CUDA only)", "torch tensors on npu"),
    "apex.amp": ("apex mixed precision", "torch.autocast(device_type='npu') and torch.npu.amp.GradScaler"),
    "apex.optimizers": ("apex fused optimizers", "torch_npu.optim.NpuFusedAdam / NpuFusedAdamW / NpuFusedSGD"),
    "apex.normalization": ("apex fused norms", "torch.nn.LayerNorm, or torch_npu.npu_rms_norm"),
    "apex.parallel": ("apex DDP / SyncBatchNorm", "torch.nn.parallel.DistributedDataParallel with hccl, "
                                                  "torch.nn.SyncBatchNorm"),
    "apex": ("NVIDIA apex", "its torch / torch_npu counterparts (autocast, torch_npu.optim)"),
    "flash_attn": ("FlashAttention kernels (CUDA only)", "torch_npu.npu_fusion_attention, or "
                                                         "torch.nn.functional.scaled_dot_product_attention"),
    "xformers": ("xFormers kernels (CUDA only)", "torch.nn.functional.scaled_dot_product_attention, "
                                                 "torch_npu.npu_fusion_attention"),
    "bitsandbytes": ("bitsandbytes 8-bit/4-bit kernels (CUDA only)", "torch_npu's quantized matmul "
                                                                    "(torch_npu.npu_quant_matmul) where it fits"),
    "triton": ("Triton kernels (GPU only)", "torch.compile (Inductor's npu path), or plain torch ops"),
    "nvidia.dali": ("NVIDIA DALI data loading", "torch.utils.data.DataLoader with pin_memory"),
    "pynvml": ("NVML queries", "torch.npu.mem_get_info / torch.npu.utilization"),
    "deepspeed.ops.adam.fused_adam": ("DeepSpeed's CUDA FusedAdam", "torch_npu.optim.NpuFusedAdam"),
}
UNSUPPORTED_NAMES = {
    "CUDAExtension": ("a custom CUDA extension (compiled CUDA kernels)",
                      "an npu kernel (torch_npu custom op) or a CPU extension (CppExtension)"),
    "flash_attn_func": ("FlashAttention", "torch_npu.npu_fusion_attention"),
    "flash_attn_varlen_func": ("FlashAttention (varlen)", "torch_npu.npu_fusion_attention (TND layout)"),
    "FusedAdam": ("a fused CUDA Adam", "torch_npu.optim.NpuFusedAdam"),
    "FusedLayerNorm": ("a fused CUDA LayerNorm", "torch.nn.LayerNorm"),
    "is_nccl_available": ("torch.distributed.is_nccl_available", "torch.distributed.is_backend_available('hccl')"),
}
CUDA_SOURCE_SUFFIXES = (".cu", ".cuh")


@dataclass
class Change:
    file: str
    line: int
    before: str
    after: str
    rule: str


@dataclass
class Finding:
    file: str
    line: int
    api: str
    what: str
    suggestion: str


@dataclass
class MigrationReport:
    files_scanned: int = 0
    files_changed: int = 0
    changes: list = field(default_factory=list)
    unsupported: list = field(default_factory=list)
    errors: list = field(default_factory=list)   # (file, message): unparseable, unreadable, unwritable
    skipped: list = field(default_factory=list)  # (file, why): binary, symlinks

    def to_json(self):
        return json.dumps({"files_scanned": self.files_scanned, "files_changed": self.files_changed,
                           "changes": [asdict(c) for c in self.changes],
                           "unsupported": [asdict(f) for f in self.unsupported],
                           "errors": [{"file": f, "message": m} for f, m in self.errors],
                           "skipped": [{"file": f, "why": w} for f, w in self.skipped]}, indent=1)

    def to_markdown(self):
        out = ["# cuda -> npu migration report", "",
               f"{self.files_scanned} Python files scanned, {self.files_changed} changed, "
               f"{len(self.changes)} changes, {len(self.unsupported)} APIs without an npu counterpart, "
               f"{len(self.errors)} errors.", ""]
        if self.unsupported:
            out += ["## APIs without an npu counterpart", "", "| file | line | API | what | suggestion |",
                    "|---|---|---|---|---|"]
            out += [f"| {f.file} | {f.line} | `{f.api}` | {f.what} | {f.suggestion or '-'} |" for f in self.unsupported]
            out.append("")
        if self.changes:
            out += ["## Changes", "", "| file | line | rule | before | after |", "|---|---|---|---|---|"]
            esc = lambda s: s.replace("|", "\\|")  # noqa: E731
            out += [f"| {c.file} | {c.line} | {c.rule} | `{esc(c.before)}` | `{esc(c.after)}` |" for c in self.changes]
            out.append("")
        if self.errors:
            out += ["## Errors (files left as they were)", ""] + [f"- {f}: {m}" for f, m in self.errors] + [""]
        if self.skipped:
            out += ["## Skipped", ""] + [f"- {f}: {w}" for f, w in self.skipped] + [""]
        return "\n".join(out)


# --- one source ---------------------------------------------------------------------

def _dotted(node):
    """'torch.cuda.amp' for an Attribute/Name chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Edits:
    def __init__(self, text):
        self.text = text
        # Lines as Python's tokenizer counts them, which the ast's line
        # numbers refer to: ended by \n, \r\n or \r only. str.splitlines
        # also ends a line at \f, \v, \x1c-\x1e, \x85, \u2028 and \u2029
        # (a form feed between functions is common), which shifted every
        # later edit onto the wrong text.
        self.lines = io.StringIO(text, newline="").readlines()
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        self.edits = []  # (start, end, replacement, rule, lineno)

    def offset(self, lineno, col):
        # ast columns are UTF-8 byte offsets; on an ASCII line (str.isascii
        # is a flag: O(1)) they are character offsets, which spares encoding
        # the line at every edit.
        line = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        if line.isascii():
            return self.starts[lineno - 1] + min(col, len(line))
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8", "replace"))

    def segment(self, node):
        """``node``'s source text: what ast.get_source_segment returns, but
        from the line starts computed once (get_source_segment splits the
        whole text into lines at every call, which made a file's cost grow
        with the square of its string edits)."""
        return self.text[self.offset(node.lineno, node.col_offset):self.offset(node.end_lineno, node.end_col_offset)]

    def replace_node(self, node, replacement, rule):
        start = self.offset(node.lineno, node.col_offset)
        end = self.offset(node.end_lineno, node.end_col_offset)
        self.replace_span(start, end, replacement, rule, node.lineno)

    def replace_span(self, start, end, replacement, rule, lineno):
        # apply() relies on it: an empty span at an edit's start would not
        # count as overlapping it.
        if not start < end:
            raise AssertionError(f"migrate: an empty edit ({start}, {end}) for rule {rule!r} at line {lineno}")
        self.edits.append((start, end, replacement, rule, lineno))

    def apply(self, file, changes):
        """The text with the edits made; one Change per edit that changed
        something, in the order of the text.

        Edits are taken from the last start to the first (for one start, the
        shortest first; for one span, the first made), and an edit that
        overlaps one already taken is dropped. Every edit taken so far starts
        at or after this one's start, so it overlaps one of them exactly when
        the last taken, which starts leftmost, starts before this one ends:
        one comparison per edit instead of one per edit taken. The text is
        built once, from the pieces between the edits (right to left, then
        reversed), instead of once per edit."""
        text = self.text
        pieces = []             # output pieces, from the end of the text backwards
        copied_from = len(text)  # text[copied_from:] is in pieces already
        leftmost = None          # start of the last edit taken
        for start, end, replacement, rule, lineno in sorted(self.edits, key=lambda e: (e[0], -e[1]), reverse=True):
            if leftmost is not None and leftmost < end:
                continue  # overlaps an edit already taken
            leftmost = start
            before = text[start:end]
            if before == replacement:
                continue
            changes.append(Change(file, lineno, before, replacement, rule))
            pieces.append(text[end:copied_from])
            pieces.append(replacement)
            copied_from = start
        pieces.append(text[:copied_from])
        changes.reverse()
        return "".join(reversed(pieces))


class _Visitor(ast.NodeVisitor):
    def __init__(self, edits, file, findings):
        self.e = edits
        self.file = file
        self.findings = findings
        self.imports_torch = None  # the first top-level `import torch` node
        self.imports_torch_npu = False

    def _find(self, node, api, table_entry):
        what, suggestion = table_entry
        self.findings.append(Finding(self.file, node.lineno, api, what, suggestion))

    @staticmethod
    def _module_entry(module):
        for prefix in sorted(UNSUPPORTED_MODULES, key=len, reverse=True):
            if module == prefix or module.startswith(prefix + "."):
                return UNSUPPORTED_MODULES[prefix]
        return None

    def _check_module(self, node, module):
        entry = self._module_entry(module)
        if entry is not None:
            self._find(node, module, entry)

    # imports
    def visit_Import(self, node):
        for alias in node.names:
            if alias.name == "torch" and self.imports_torch is None and node.col_offset == 0:
                self.imports_torch = node
            if alias.name.split(".")[0] == "torch_npu":
                self.imports_torch_npu = True
            self._check_module(node, alias.name)
            if alias.name == "torch.cuda" or alias.name.startswith("torch.cuda."):
                if not alias.name.startswith("torch.cuda.nvtx"):
                    self._rewrite_import_name(node, alias.name)
        self.generic_visit(node)

    def _rewrite_import_name(self, node, name):
        segment = self.e.segment(node) or ""
        start = self.e.offset(node.lineno, node.col_offset)
        at = segment.find(name)
        if at >= 0:
            new = name.replace("torch.cuda", "torch.npu", 1)
            self.e.replace_span(start + at, start + at + len(name), new, "torch.cuda -> torch.npu", node.lineno)

    def visit_ImportFrom(self, node):
        module = node.module or ""
        if module.split(".")[0] == "torch_npu":
            self.imports_torch_npu = True
        # One finding per imported name: its own entry, else its module's.
        for alias in node.names:
            entry = UNSUPPORTED_NAMES.get(alias.name) or self._module_entry(f"{module}.{alias.name}")
            if entry is not None:
                self._find(node, f"{module}.{alias.name}", entry)
        if (module == "torch.cuda" or module.startswith("torch.cuda.")) and not module.startswith("torch.cuda.nvtx"):
            self._rewrite_import_name(node, module)
        elif module == "torch" and any(a.name == "cuda" for a in node.names):
            for alias in node.names:
                if alias.name == "cuda":
                    segment = self.e.segment(node) or ""
                    start = self.e.offset(node.lineno, node.col_offset)
                    m = re.search(r"\bcuda\b", segment[segment.find("import"):])
                    if m:
                        at = segment.find("import") + m.start()
                        self.e.replace_span(start + at, start + at + 4, "npu as cuda" if alias.asname is None else "npu",
                                            "from torch import cuda -> npu", node.lineno)
        self.generic_visit(node)

    # expressions
    def visit_Attribute(self, node):
        dotted = _dotted(node)
        if dotted == "torch.cuda":
            self.e.replace_node(node, "torch.npu", "torch.cuda -> torch.npu")
            return
        if dotted is not None and dotted.startswith("torch.cuda.nvtx"):
            self._find(node, dotted, UNSUPPORTED_MODULES["torch.cuda.nvtx"])
            return
        if node.attr == "is_cuda" and isinstance(node.ctx, ast.Load):
            self._replace_attr(node, "is_npu", ".is_cuda -> .is_npu")
        if node.attr in UNSUPPORTED_NAMES and dotted is not None:
            self._find(node, dotted, UNSUPPORTED_NAMES[node.attr])
        self.generic_visit(node)

    def _replace_attr(self, node, new, rule):
        end = self.e.offset(node.end_lineno, node.end_col_offset)
        self.e.replace_span(end - len(node.attr), end, new, rule, node.end_lineno)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "cuda" and _dotted(func) != "torch.cuda":
            self._replace_attr(func, "npu", ".cuda() -> .npu()")
            self.visit(func.value)
            for arg in node.args + [k.value for k in node.keywords]:
                self.visit(arg)
            return
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in _BACKEND_CALLS:
            for arg in node.args[:1]:
                self._backend(arg)
            for kw in node.keywords:
                if kw.arg == "backend":
                    self._backend(kw.value)
        if name in ("load", "load_inline") and _uses_cuda_sources(node):
            self._find(node, name, ("a custom CUDA extension built at run time (.cu sources)",
                                    UNSUPPORTED_NAMES["CUDAExtension"][1]))
        if name in UNSUPPORTED_NAMES and isinstance(func, ast.Name):
            self._find(node, name, UNSUPPORTED_NAMES[name])
        self.generic_visit(node)

    def _backend(self, node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in ("nccl",
                                                                                                     "cuda:nccl"):
            self.e.replace_node(node, _requote(self.e, node, node.value.lower().replace("nccl", "hccl")),
                                "nccl -> hccl")

    def visit_Constant(self, node):
        if isinstance(node.value, str):
            if _DEVICE.match(node.value):
                self.e.replace_node(node, _requote(self.e, node, "npu" + node.value[4:]), "cuda device -> npu")
            elif node.value == "CUDA_VISIBLE_DEVICES":
                self.e.replace_node(node, _requote(self.e, node, "ASCEND_RT_VISIBLE_DEVICES"),
                                    "CUDA_VISIBLE_DEVICES -> ASCEND_RT_VISIBLE_DEVICES")

    def visit_JoinedStr(self, node):
        first = node.values[0] if node.values else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("cuda:") \
                and len(node.values) > 1:
            segment = self.e.segment(node) or ""
            at = segment.find("cuda:")
            if at >= 0:
                start = self.e.offset(node.lineno, node.col_offset) + at
                self.e.replace_span(start, start + 4, "npu", "cuda device -> npu", node.lineno)
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                self.visit(value)

    def visit_Assign(self, node):
        for target in node.targets:
            dotted = _dotted(target)
            if dotted in ("torch.backends.cudnn.deterministic",):
                value = self.e.segment(node.value)
                self.e.replace_node(node, f"torch.use_deterministic_algorithms({value})",
                                    "cudnn.deterministic -> torch.use_deterministic_algorithms")
                return
            if dotted in ("torch.backends.cudnn.allow_tf32", "torch.backends.cuda.matmul.allow_tf32"):
                value = self.e.segment(node.value)
                self.e.replace_node(node, f"torch.npu.matmul.allow_hf32 = {value}", "allow_tf32 -> allow_hf32")
                return
            if dotted in ("torch.backends.cudnn.benchmark", "torch.backends.cudnn.enabled"):
                text = self.e.segment(node) or dotted
                self.e.replace_node(node, f"pass  # migrated to npu: `{text}` has no npu counterpart",
                                    f"{dotted.rsplit('.', 1)[1]} -> (no npu counterpart)")
                return
        self.generic_visit(node)


def _requote(edits, node, value):
    """``value`` in the quotes ``node`` was written with."""
    segment = edits.segment(node) or '""'
    prefix = re.match(r"^[rbuRBU]*", segment).group(0)
    quote = segment[len(prefix):len(prefix) + 3] if segment[len(prefix):len(prefix) + 3] in ('"""', "'''") else \
        segment[len(prefix):len(prefix) + 1]
    return f"{prefix}{quote}{value}{quote}"


def _uses_cuda_sources(call):
    for node in ast.walk(call):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(CUDA_SOURCE_SUFFIXES):
            return True
        if isinstance(node, ast.keyword) and node.arg in ("cuda_sources", "with_cuda"):
            return True
    return False


@contextlib.contextmanager
def _no_cycle_collection():
    """Python's cyclic garbage collector off (as it was before, after).

    A large file's syntax tree is millions of objects, and the allocations
    of parsing it and of its Changes start collections that walk them again
    and again: about half the time of a file with many edits. The tree, the
    edits and the Changes hold no reference cycles, so those collections
    find nothing, and everything is freed by reference counting as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _line_ending(line):
    """The line's terminator ("\r\n", "\n" or "\r"), or "" for none."""
    for ending in ("\r\n", "\n", "\r"):
        if line.endswith(ending):
            return ending
    return ""


def migrate_source(text, file="<string>", report=None):
    """The migrated ``text`` of one Python source (raises SyntaxError when it
    does not parse). Changes and findings go into ``report``."""
    report = report if report is not None else MigrationReport()
    with _no_cycle_collection():
        tree = ast.parse(text, filename=file)
        edits = _Edits(text)
        visitor = _Visitor(edits, file, report.unsupported)
        visitor.visit(tree)
        changes = []
        new = edits.apply(file, changes)
        import_torch = visitor.imports_torch if not visitor.imports_torch_npu else None
        # Freed while the collector is off: left for later, they would be
        # walked by its first collection after it is back on.
        del tree, edits, visitor
    if changes and import_torch is not None:
        node = import_torch
        starts = _Edits(new).starts  # line starts of the migrated text
        line_end = starts[node.end_lineno] if node.end_lineno < len(starts) else len(new)
        # The added line ends as the import's line does (\r\n files stay \r\n);
        # a last line without one gets the file's first line ending.
        own = _line_ending(new[starts[node.end_lineno - 1]:line_end])
        ending = own or _line_ending(new[:starts[1]] if len(starts) > 1 else "") or "\n"
        separator = "" if own else ending
        new = new[:line_end] + separator + "import torch_npu  # added by the npu migration" + ending + new[line_end:]
        changes.append(Change(file, node.lineno, "import torch", "import torch\nimport torch_npu", "import torch_npu"))
    report.changes.extend(changes)
    return new


# --- files and trees ----------------------------------------------------------------

def _write_atomically(path, text):
    path = pathlib.Path(path)
    tmp = path.with_name(f".{path.name}.npu-migrate.tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    try:
        if path.exists():
            shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def _read_python(path):
    with open(path, "rb") as f:
        raw = f.read()
    if b"\0" in raw:
        raise ValueError("binary content")
    encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    return raw.decode(encoding)


def _is_inside(path, root):
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def migrate_path(src, dst=None, dry_run=False, report=None, progress=None, diff_out=None):
    """Migrates a file or a tree; returns the MigrationReport. ``dst`` None:
    in place. Files that fail (unparseable, binary, unreadable, unwritable)
    are reported and left alone; the rest are migrated."""
    report = report if report is not None else MigrationReport()
    src = pathlib.Path(src)
    if not src.exists():
        raise FileNotFoundError(f"migrate: '{src}' does not exist")
    dst = pathlib.Path(dst) if dst is not None else None
    if src.is_dir() and dst is not None:
        if dst.resolve() != src.resolve() and _is_inside(dst, src):
            raise ValueError(f"migrate: the output directory '{dst}' is inside the input '{src}'; choose one "
                             f"outside it (or omit -o to migrate in place)")
    if src.is_file():
        pairs = [(src, dst if dst is not None else src)]
        others = []
    else:
        pairs, others = [], []
        for root, dirs, files in os.walk(src, followlinks=False):
            root = pathlib.Path(root)
            for d in list(dirs):
                if (root / d).is_symlink():
                    report.skipped.append((str(root / d), "a symbolic link to a directory (not followed)"))
                    dirs.remove(d)
            dirs.sort()
            for name in sorted(files):
                path = root / name
                target = (dst / path.relative_to(src)) if dst is not None else path
                if path.is_symlink():
                    report.skipped.append((str(path), "a symbolic link (not followed)"))
                    continue
                if name.endswith(".py"):
                    pairs.append((path, target))
                else:
                    if name.endswith(CUDA_SOURCE_SUFFIXES):
                        report.unsupported.append(Finding(str(path), 0, name, "CUDA kernel source",
                                                          "an npu kernel (torch_npu custom op) or plain torch ops"))
                    others.append((path, target))
    total = len(pairs)
    for i, (path, target) in enumerate(pairs, 1):
        report.files_scanned += 1
        try:
            text = _read_python(path)
        except (OSError, ValueError, SyntaxError) as e:
            report.errors.append((str(path), f"cannot be read as Python source: {e}"))
            _copy_unchanged(path, target, dry_run, report)
            continue
        before = len(report.changes)
        try:
            new = migrate_source(text, str(path), report)
        except SyntaxError as e:
            report.errors.append((str(path), f"does not parse (line {e.lineno}: {e.msg}); left unchanged"))
            _copy_unchanged(path, target, dry_run, report)
            continue
        changed = new != text
        report.files_changed += changed
        if dry_run:
            if changed and diff_out is not None:
                diff_out.writelines(difflib.unified_diff(text.splitlines(keepends=True), new.splitlines(keepends=True),
                                                         str(path), f"{target} (migrated)"))
        elif changed or target != path:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                _write_atomically(target, new)
            except OSError as e:
                del report.changes[before:]
                report.files_changed -= changed
                report.errors.append((str(target), f"cannot be written: {e.strerror or e}"))
        if progress is not None and (i % 100 == 0 or i == total) and total >= 100:
            progress(f"migrate: {i}/{total} Python files")
    if not dry_run and dst is not None:
        for path, target in others:
            _copy_unchanged(path, target, dry_run, report)
    return report


def _copy_unchanged(path, target, dry_run, report):
    if dry_run or target == path:
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    except OSError as e:
        report.errors.append((str(target), f"cannot be copied: {e.strerror or e}"))


def write_report(report, path):
    path = pathlib.Path(path)
    outputs = {".md": [path], ".json": [path]}.get(path.suffix, [path.with_name(path.name + ".md"),
                                                                  path.with_name(path.name + ".json")])
    for out in outputs:
        _write_atomically(out, report.to_json() if out.suffix == ".json" else report.to_markdown())
    return outputs


class ModelMigrator:
    """Seed 001's helper, on the syntax-tree migration."""

    @staticmethod
    def migrate_code(source_file, target_file):
        migrate_path(source_file, target_file)
        return target_file

    @staticmethod
    def check_compatibility(model, input_shape):
        from torch_npu.tools.check_model import check_compatibility
        return check_compatibility(model, input_shape)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_npu.tools.migrate",
                                     description="Rewrites CUDA PyTorch code for npu (by the syntax tree).")
    parser.add_argument("src", help="a Python file or a directory tree")
    parser.add_argument("-o", "--output", help="where to write (default: in place)")
    parser.add_argument("--dry-run", action="store_true", help="write nothing; print a unified diff")
    parser.add_argument("--report", help="write the report: FILE.md, FILE.json, or both for other names")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    progress = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    try:
        report = migrate_path(args.src, args.output, dry_run=args.dry_run, progress=progress, diff_out=sys.stdout)
    except (FileNotFoundError, ValueError) as e:
        print(str(e), file=sys.stderr)
        return 2
    if args.report:
        write_report(report, args.report)
    print(f"migrate: {report.files_scanned} Python files, {report.files_changed} changed, {len(report.changes)} "
          f"changes, {len(report.unsupported)} APIs without an npu counterpart, {len(report.errors)} errors",
          file=sys.stderr)
    for file, message in report.errors:
        print(f"migrate: {file}: {message}", file=sys.stderr)
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
