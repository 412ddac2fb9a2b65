#!/usr/bin/env python3
"""Runs MindSpeed's own unit tests (its `tests_extend/`), unchanged, on vNPU.

    VNPU_MINDSPEED_STACK=STACK python scripts/run_mindspeed_tests.py [--timeout S] [--out FILE] [--run-all] [PATH...]

PATH is a file or folder under MindSpeed's tree (default tests_extend/unit_tests).
The stack comes from scripts/setup_mindspeed.sh (docs/mindspeed.md): its venv,
Megatron-LM and MindSpeed trees. As MindSpeed's README says, the tests run from
the Megatron-LM root with MindSpeed on PYTHONPATH; each file in its own
process (`python -m pytest FILE`), bounded by --timeout seconds.

Prints per file: passed, failed, errors, skipped (pytest's JUnit XML), then
the totals, and writes them to --out (JSON).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET


def counts_of(junit_path):
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    if not os.path.exists(junit_path):
        return counts
    for case in ET.parse(junit_path).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        if "failure" in kinds:
            counts["failed"] += 1
        elif "error" in kinds:
            counts["errors"] += 1
        elif "skipped" in kinds:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return counts


def run_file(path, stack, timeout, run_all=False):
    python = os.path.join(stack, "venv", "bin", "python")
    megatron = os.path.join(stack, "Megatron-LM")
    mindspeed = os.path.join(stack, "MindSpeed")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([mindspeed, megatron]), CUDA_DEVICE_MAX_CONNECTIONS="1",
               PATH=os.pathsep.join([os.path.join(stack, "venv", "bin"), os.environ.get("PATH", "")]))
    with tempfile.TemporaryDirectory() as tmp:
        junit = os.path.join(tmp, "junit.xml")
        try:
            extra = ["--run-all"] if run_all else []
            proc = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                                   *extra, path], cwd=megatron, env=env, capture_output=True, text=True, timeout=timeout,
                                  start_new_session=True)
            counts = counts_of(junit)
            tail = (proc.stdout + proc.stderr)[-1500:]
            if proc.returncode not in (0, 1, 5) and not any(counts.values()):
                counts["errors"] += 1  # collection failed or the process died
        except subprocess.TimeoutExpired as e:
            counts = counts_of(junit)
            counts["errors"] += 1
            tail = f"timed out after {timeout} s\n" + ((e.stdout or b"")[-1000:].decode(errors="replace")
                                                       if isinstance(e.stdout, bytes) else str(e.stdout)[-1000:])
    return counts, tail


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", default=["tests_extend/unit_tests"])
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--out", default="mindspeed_tests.json")
    parser.add_argument("--run-all", action="store_true",
                        help="run MindSpeed's slow tests too (its conftest's --run-all)")
    args = parser.parse_args()
    stack = os.environ.get("VNPU_MINDSPEED_STACK")
    if not stack or not os.path.isdir(os.path.join(stack, "venv")):
        sys.exit("set VNPU_MINDSPEED_STACK to a stack made by scripts/setup_mindspeed.sh (docs/mindspeed.md)")
    root = os.path.realpath(os.path.join(stack, "MindSpeed"))
    files = []
    for path in args.paths:
        full = os.path.join(root, path)
        if os.path.isfile(full):
            files.append(full)
            continue
        for folder, _, names in os.walk(full):
            files += [os.path.join(folder, n) for n in names if n.startswith("test_") and n.endswith(".py")]
    results = {}
    totals = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    for path in sorted(files):
        counts, tail = run_file(path, stack, args.timeout, args.run_all)
        name = os.path.relpath(path, root)
        results[name] = dict(counts, tail=tail)
        for k in totals:
            totals[k] += counts[k]
        print(f"{name}: {counts['passed']} passed, {counts['failed']} failed, {counts['errors']} errors, "
              f"{counts['skipped']} skipped", flush=True)
    ran = totals["passed"] + totals["failed"] + totals["errors"]
    print(f"total: {totals} -> {100.0 * totals['passed'] / max(ran, 1):.1f}% of the tests that ran passed")
    with open(args.out, "w") as f:
        json.dump({"totals": totals, "files": results}, f, indent=1)


if __name__ == "__main__":
    main()
