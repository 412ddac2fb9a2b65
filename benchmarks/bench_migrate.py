"""The migration tool's cost: in the number of edits in one file, and on a
large tree.

    python benchmarks/bench_migrate.py                      # both parts below
    python benchmarks/bench_migrate.py --edits 5000,20000   # generated files only
    python benchmarks/bench_migrate.py --tree [TREE]        # the tree only

Generated files: one file of N lines, one edit each, of two kinds:
``cuda`` (``x = t.cuda()`` in a few forms: the attribute rule) and
``device`` (``torch.device("cuda:K")``: the string rule, which reads the
node's source segment). Each size runs in its own process, so the peak
memory printed (max RSS, with the file's text, its syntax tree and the
output; "base" is the max RSS before migrating) is that case's alone, and a case still running after --timeout
seconds is stopped and printed as not finished (with the peak so far).
The per-edit ratio to the smallest size says whether the cost is linear (a
ratio near 1) or grows with N.

The tree: the installed transformers package's sources (about 2,900
Python files) in dry-run mode (nothing written): files per second, changes
found and peak memory.
"""

import argparse
import json
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

from torch_npu.tools.migrate import migrate_path

DEFAULT_SIZES = (5_000, 20_000, 200_000)
KINDS = ("cuda", "device")


def generated_source(n, kind):
    """``import torch`` and ``n`` lines with one cuda -> npu edit each."""
    if kind == "cuda":
        forms = ("x{i} = batch[{i}].cuda()\n", "y{i} = model_{i}.cuda(non_blocking=True)\n",
                 "z{i} = torch.ones({i}).cuda().float()\n")
    else:
        forms = ('d{i} = torch.device("cuda:{k}")\n', "e{i} = t.to(device='cuda')\n",
                 'f{i} = torch.zeros(3, device="cuda:{k}")\n')
    lines = ["import torch\n"]
    lines += [forms[i % len(forms)].format(i=i, k=i % 8) for i in range(n)]
    return "".join(lines)


def _one_file(n, kind):
    """Child process: migrates one generated file, prints a JSON line."""
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / f"generated_{kind}_{n}.py"
        src.write_text(generated_source(n, kind))
        out = pathlib.Path(tmp) / "migrated.py"
        base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # the interpreter, torch_npu, the text
        t0 = time.perf_counter()
        report = migrate_path(src, out)
        seconds = time.perf_counter() - t0
        text = out.read_text()
        size = src.stat().st_size
    expected = n + 1  # every line's edit, and the added `import torch_npu`
    if len(report.changes) != expected or report.errors or "cuda" in text:
        raise SystemExit(f"wrong result: {len(report.changes)} changes (expected {expected}), errors "
                         f"{report.errors}")
    print(json.dumps({"seconds": seconds, "changes": len(report.changes), "bytes": size, "base_kb": base_kb,
                      "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))


def _peak_kb_of(pid):
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def bench_edits(sizes, timeout):
    print(f"one generated file, one edit per line (each case in its own process, stopped after {timeout:.0f} s)")
    print(f"{'kind':>6} {'edits':>8} {'MB':>6} {'seconds':>9} {'us/edit':>8} {'ratio':>6} {'peak MB':>8} {'(base)':>7}")
    for kind in KINDS:
        first_per_edit = None
        for n in sizes:
            child = subprocess.Popen([sys.executable, __file__, "--one-file", str(n), "--kind", kind],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                out, err = child.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                peak = _peak_kb_of(child.pid)
                child.kill()
                child.communicate()
                peak_text = f"{peak / 1024:.0f}" if peak else "?"
                print(f"{kind:>6} {n:>8} {'':>6} {'>' + format(timeout, '.0f'):>9} {'':>8} {'':>6} {peak_text:>8}"
                      f"  not finished: stopped after {timeout:.0f} s (peak so far)")
                continue
            if child.returncode != 0:
                print(f"{kind:>6} {n:>8}  failed (exit {child.returncode}): {err.strip()[-500:]}")
                continue
            r = json.loads(out.strip().splitlines()[-1])
            per_edit = r["seconds"] / n * 1e6
            first_per_edit = first_per_edit or per_edit
            print(f"{kind:>6} {n:>8} {r['bytes'] / 1e6:>6.2f} {r['seconds']:>9.2f} {per_edit:>8.1f} "
                  f"{per_edit / first_per_edit:>6.2f} {r['peak_kb'] / 1024:>8.0f} {r['base_kb'] / 1024:>7.0f}")


def bench_tree(tree):
    if tree is None:
        import transformers
        tree = pathlib.Path(transformers.__file__).parent
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    report = migrate_path(tree, dry_run=True)
    seconds = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"tree: {tree}")
    print(f"{report.files_scanned} Python files in {seconds:.1f} s: {report.files_scanned / seconds:.0f} files/s; "
          f"{report.files_changed} would change, {len(report.changes)} changes, {len(report.unsupported)} APIs "
          f"without an npu counterpart, {len(report.errors)} errors")
    print(f"peak memory (max RSS of the process): {peak_mb:.0f} MB (before: {before / 1024:.0f} MB)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", nargs="?", help="the tree to migrate (default: the installed transformers)")
    parser.add_argument("--edits", help="comma-separated edit counts: the generated files only")
    parser.add_argument("--tree", dest="tree_only", action="store_true", help="the tree only")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one generated file may take")
    parser.add_argument("--one-file", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--kind", choices=KINDS, default="cuda", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_file is not None:
        _one_file(args.one_file, args.kind)
        return
    both = not args.edits and not args.tree_only and args.tree is None
    if args.edits or both:
        sizes = [int(s) for s in args.edits.split(",")] if args.edits else DEFAULT_SIZES
        bench_edits(sizes, args.timeout)
    if args.tree_only or args.tree is not None or both:
        bench_tree(args.tree)


if __name__ == "__main__":
    main()
