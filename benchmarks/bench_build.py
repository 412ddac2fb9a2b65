"""How long vNPU takes to build: clean, and after touching one file.

Builds a copy of this checkout (its committed files plus uncommitted changes,
via `git ls-files`) in a temporary folder with `scripts/build.sh`, with ccache
off, so the figure is what a fresh machine pays. Prints the clean build's wall
and CPU time and the slowest targets from ninja's log; with --touch FILE, then
touches FILE and reports the incremental rebuild the same way.

    python benchmarks/bench_build.py
    python benchmarks/bench_build.py --touch runtime/include/vnpu/stream.h
    python benchmarks/bench_build.py --keep /tmp/vnpu-build   # keep the copy

The copy needs the build tools scripts/setup.sh installs (cmake, ninja, g++)
and torch; nothing is installed here. Timing depends on the machine: the
figures in the docs were taken on 2 cores with nothing else running.
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def copy_checkout(dest):
    """Tracked and untracked-but-not-ignored files: what a clone would hold, plus local edits."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, check=True, capture_output=True).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        source = os.path.join(ROOT, name)
        if not os.path.isfile(source):
            continue  # deleted in the work tree
        target = os.path.join(dest, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(source, target)


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_build(tree, env):
    """(wall s, CPU s) of one scripts/build.sh run in `tree`."""
    cpu0, wall0 = children_cpu_seconds(), time.perf_counter()
    proc = subprocess.run([os.path.join(tree, "scripts", "build.sh")], cwd=tree, env=env,
                          capture_output=True, text=True)
    wall, cpu = time.perf_counter() - wall0, children_cpu_seconds() - cpu0
    if proc.returncode != 0:
        sys.exit(f"build failed in {tree}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return wall, cpu


def ninja_entries(build_dir):
    """[(seconds, target)] from .ninja_log: the latest build of each target."""
    latest = {}
    with open(os.path.join(build_dir, ".ninja_log")) as log:
        for line in log:
            if line.startswith("#"):
                continue
            start, end, _mtime, target, _hash = line.rstrip("\n").split("\t")
            latest[target] = (int(start), int(end))
    return [((end - start) / 1000.0, target) for target, (start, end) in latest.items()]


def report(title, wall, cpu, entries, top):
    print(f"{title}: {wall:.1f} s wall, {cpu:.1f} CPU-s (children), {len(entries)} targets rebuilt")
    for seconds, target in sorted(entries, reverse=True)[:top]:
        print(f"  {seconds:7.1f} s  {target}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--touch", action="append", default=[],
                        help="after the clean build, touch this file (repo-relative) and time the rebuild")
    parser.add_argument("--top", type=int, default=10, help="how many of the slowest targets to list")
    parser.add_argument("--keep", metavar="DIR", help="build in DIR (emptied first) and keep it")
    args = parser.parse_args()

    tree = args.keep or tempfile.mkdtemp(prefix="vnpu-bench-build-")
    if args.keep:
        shutil.rmtree(tree, ignore_errors=True)
        os.makedirs(tree)
    env = dict(os.environ, CCACHE_DISABLE="1", PYTHON=sys.executable)
    try:
        copy_checkout(tree)
        print(f"building a copy of {ROOT} in {tree} on {os.cpu_count()} cores, ccache off")
        wall, cpu = timed_build(tree, env)
        report("clean build", wall, cpu, ninja_entries(os.path.join(tree, "build")), args.top)
        for name in args.touch:
            path = os.path.join(tree, name)
            if not os.path.isfile(path):
                sys.exit(f"--touch {name}: no such file in the checkout")
            # ninja's log stamps are ms since its own run began, so a rebuilt target
            # is one whose log line changed.
            with open(os.path.join(tree, "build", ".ninja_log")) as log:
                before = {line.split("\t")[3]: line for line in log if not line.startswith("#")}
            os.utime(path)
            wall, cpu = timed_build(tree, env)
            with open(os.path.join(tree, "build", ".ninja_log")) as log:
                after = {line.split("\t")[3]: line for line in log if not line.startswith("#")}
            rebuilt = [t for t, line in after.items() if before.get(t) != line]
            entries = [e for e in ninja_entries(os.path.join(tree, "build")) if e[1] in rebuilt]
            report(f"after touching {name}", wall, cpu, entries, args.top)
    finally:
        if not args.keep:
            shutil.rmtree(tree, ignore_errors=True)


if __name__ == "__main__":
    main()
