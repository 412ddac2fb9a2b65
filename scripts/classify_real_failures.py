#!/usr/bin/env python3
"""Which of real torch_npu's failing tests fail the same way without vNPU.

    python scripts/classify_real_failures.py --work DIR [--timeout S]

Reads DIR/results.json (written by scripts/run_real_tests.py) and runs each
file that has failing tests again, whole and in one process as the runner
ran it, in the same exported snapshot but with vNPU replaced by a null
torch_npu: a package that imports nothing of vNPU, says there is no npu
(``torch.npu.is_available()`` is False) and whose
``torchair.get_npu_backend()`` compiles to the eager FX graph. A test that
fails there with the same message (whole, object addresses aside) fails
for a reason vNPU cannot change: most of them are copies of PyTorch's own tests (test/dynamo, test/_inductor,
test/distributed) that expect an older torch's behaviour (graph printouts,
counters, error texts) than the torch 2.13 vNPU runs on. A file that cannot
be collected is collected again there and its last error line compared. A
test that passes there, fails otherwise, cannot run there (it needs the
npu), or whose failure names torch_npu or torchair stays counted against vNPU.

Writes DIR/baseline.json ({test: "same" | "differs"}) and prints, per
directory, the pass rate of the tests that ran with and without the ones that
fail the same without vNPU.
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

NULL_TORCH_NPU = '''
# A null torch_npu (vNPU's scripts/classify_real_failures.py): no npu device.
import sys
import types

import torch

__version__ = "0+null"
npu = types.ModuleType("torch.npu")
npu.is_available = lambda: False
npu.device_count = lambda: 0
torch.npu = npu
sys.modules["torch.npu"] = npu
'''

NULL_TORCHAIR = '''
# A null torchair (vNPU's scripts/classify_real_failures.py): compiles to the eager graph.
class CompilerConfig:
    pass


def get_npu_backend(compiler_config=None):
    return lambda gm, example_inputs: gm.forward
'''


# What differs between two runs of the same failure: object addresses, the
# time and process id of glog-style log lines (torch's logging format,
# "I1207 02:25:05.718000 6604 file.py:318]"), temporary directories and the
# debug directories named for the time and the process.
_RUN_SPECIFIC = (
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"\b([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ "), r"\1<time> <pid> "),
    (re.compile(r"/tmp/tmp[\w.-]+"), "/tmp/tmp?"),
    (re.compile(r"run_\d{4}(_\d+)+-pid_\d+"), "run_<time>-pid_?"),
)


def normalized(message):
    """A failure's whole message with what is particular to one run blanked
    (_RUN_SPECIFIC): two failures are the same when these agree."""
    message = (message or "").strip()
    for pattern, blank in _RUN_SPECIFIC:
        message = pattern.sub(blank, message)
    return message


def names_torch_npu(text):
    """A failure that names torch_npu or torchair (a missing module or name
    of theirs, a traceback through them) is never torch's alone."""
    return re.search(r"torch_npu|torchair", text or "") is not None


def last_error_line(output):
    lines = [line for line in (output or "").splitlines() if line.startswith("E ")]
    return lines[-1].strip()[:200] if lines else ""


def collects_the_same(test_file, output, env, timeout):
    """Whether the file fails to collect without vNPU, with the same last error line."""
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                               os.path.basename(test_file)], cwd=os.path.dirname(test_file), env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    mine = last_error_line(output)
    return (done.returncode != 0 and mine != "" and not names_torch_npu(mine) and
            last_error_line(done.stdout) == mine)


def junit_outcomes(xml):
    """{node: (outcome, whole message)} of a pytest JUnit XML file."""
    outcomes = {}
    if os.path.exists(xml):
        for case in ET.parse(xml).getroot().iter("testcase"):
            node = "::".join(case.get("classname").split(".")[1:] + [case.get("name")])
            outcomes[node] = ("passed", "")
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcomes[node] = ({"failure": "failed", "error": "errors", "skipped": "skipped"}[child.tag],
                                      child.get("message"))
                    break
    return outcomes


def run_file(test_file, env, timeout):
    """{node: (outcome, message)} of every test of one file, run in the null
    environment as the runner ran it with vNPU (the whole file, in order, in
    one process: tests that disturb later ones do so in both runs)."""
    xml = test_file + ".null-junit.xml"
    if os.path.exists(xml):
        os.remove(xml)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
           os.path.basename(test_file)]
    try:
        subprocess.run(cmd, cwd=os.path.dirname(test_file), env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    return junit_outcomes(xml)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per test file")
    parser.add_argument("--only", default="", help="only the test files whose path contains this")
    args = parser.parse_args()
    work = os.path.abspath(args.work)
    results = json.load(open(os.path.join(work, "results.json")))["files"]

    null_dir = os.path.join(work, "_null_torch_npu")
    os.makedirs(os.path.join(null_dir, "torch_npu"), exist_ok=True)
    with open(os.path.join(null_dir, "torch_npu", "__init__.py"), "w") as f:
        f.write(NULL_TORCH_NPU)
    with open(os.path.join(null_dir, "torchair.py"), "w") as f:
        f.write(NULL_TORCHAIR)
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    env.setdefault("PYTHONHASHSEED", "0")  # as scripts/run_real_tests.py runs the files
    # The runner's overlay serves the snapshot's torch_npu.testing; the null package the rest.
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(work, "_vnpu_overlay"), null_dir])

    baseline = {}
    for rel, entry in sorted(results.items()):
        if args.only not in rel:
            continue
        failing = {}
        for case in entry["cases"]:
            if case["outcome"] not in ("failed", "errors"):
                continue
            node = "::".join(case["name"].split(".")[1:])
            if case["message"] == "collection failure":
                same = collects_the_same(os.path.join(work, rel), entry["output_tail"], env, args.timeout)
                baseline[f"{rel}::{node}"] = "same" if same else "differs"
                print(f"{rel} (collection): {'same' if same else 'differs'}", flush=True)
            else:
                failing[node] = case["message"]
        if not failing:
            continue
        outcomes = run_file(os.path.join(work, rel), env, args.timeout)
        # The runner's XML keeps each message whole (results.json keeps 300 characters).
        whole = junit_outcomes(os.path.join(work, rel) + ".vnpu-junit.xml")
        for node, message in sorted(failing.items()):
            message = whole.get(node, (None, message))[1]
            outcome, null_message = outcomes.get(node, ("no result", ""))
            same = (outcome in ("failed", "errors") and not names_torch_npu(message) and
                    normalized(null_message) == normalized(message))
            baseline[f"{rel}::{node}"] = "same" if same else "differs"
            print(f"{rel}::{node}: {'same' if same else 'differs (' + outcome + ')'}", flush=True)
    with open(os.path.join(work, "baseline.json"), "w") as f:
        json.dump(baseline, f, indent=1)

    totals = collections.defaultdict(collections.Counter)
    for rel, entry in results.items():
        t = totals[os.path.dirname(rel)]
        for case in entry["cases"]:
            if case["outcome"] == "skipped":
                continue
            t["ran"] += 1
            t["passed"] += case["outcome"] == "passed"
            node = "::".join(case["name"].split(".")[1:])
            t["same"] += baseline.get(f"{rel}::{node}") == "same"
    for directory, t in sorted(totals.items()):
        rate = 100.0 * t["passed"] / t["ran"] if t["ran"] else 0.0
        rest = t["ran"] - t["same"]
        rate_rest = 100.0 * t["passed"] / rest if rest else 0.0
        print(f"== {directory}: {t['passed']}/{t['ran']} passed ({rate:.1f}%); {t['same']} fail the same without "
              f"vNPU; {t['passed']}/{rest} of the rest ({rate_rest:.1f}%)")


if __name__ == "__main__":
    main()
