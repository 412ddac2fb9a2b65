"""The migration tool on a large tree: the installed transformers package's
sources (about 2,000 Python files), in dry-run mode (nothing written).
Prints files per second, changes found and peak memory.

    python benchmarks/bench_migrate.py [TREE]
"""

import pathlib
import resource
import sys
import time

from torch_npu.tools.migrate import migrate_path


def main():
    if len(sys.argv) > 1:
        tree = pathlib.Path(sys.argv[1])
    else:
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


if __name__ == "__main__":
    main()
