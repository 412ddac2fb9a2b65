"""A real client's own test suite on npu against cpu: transformers' ModelTesterMixin.

    python benchmarks/bench_client_suite.py [--models llama,gpt2,...] [--keep DIR]

What runs: the `tests/` folder of the transformers source distribution of the
installed version (fetched from PyPI with `pip download`, or `--sdist PATH`),
which carries `test_modeling_common.py` (ModelTesterMixin: ~120 tests per model)
but not the per-model test files (nor ConfigTester's helpers); benchmarks/client_suite/test_tiny_models.py
supplies those, tiny random-weight configs in the shape of transformers' own
testers. The sdist also omits `tests/generation` and `tests/exporters`, which
ModelTesterMixin imports for its GenerationTesterMixin and ExportTesterMixin
bases: they are written here as empty classes, so generate() and torch.export
tests are not part of the subset (the rest of ModelTesterMixin is).

The subset runs twice under pytest, TRANSFORMERS_TEST_DEVICE=npu then cpu, each
with a junit report. Printed: the ratio npu/cpu of the summed time of the tests
that passed on both, the time of the tests that ran on npu only (transformers
runs some in a fresh pytest subprocess, on accelerators only), the tests whose
outcome differs between the two, and the top 20 tests by ratio. Not a test: no
threshold, the machines are shared.
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ("llama", "mistral", "qwen2", "gpt2", "bert", "t5")
CLASS_OF = {"llama": "LlamaTinyTest", "mistral": "MistralTinyTest", "qwen2": "Qwen2TinyTest",
            "gpt2": "GPT2TinyTest", "bert": "BertTinyTest", "t5": "T5TinyTest"}

# What a launcher sets for a job of one rank. ModelTesterMixin's ZeRO-3 tests call
# deepspeed.zero.Init, which otherwise looks for the job through mpi4py.
SINGLE_RANK_LAUNCH = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
                      "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29631"}

EMPTY_MIXINS = {
    "exporters/test_export.py": "class ExportTesterMixin:\n    pass\n",
    "generation/test_utils.py": "class GenerationTesterMixin:\n    pass\n",
}


# What test_modeling_common.py imports beyond transformers' own requirements (its "testing" extra).
TEST_REQUIREMENTS = ("parameterized==0.9.0",)


def install_test_requirements():
    missing = []
    for req in TEST_REQUIREMENTS:
        try:
            __import__(req.split("==")[0])
        except ImportError:
            missing.append(req)
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)


def fetch_sdist(version, dest):
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                    f"transformers=={version}", "-d", dest], check=True)
    found = glob.glob(os.path.join(dest, f"transformers-{version}.tar.gz"))
    if not found:
        sys.exit(f"pip download gave no transformers-{version}.tar.gz in {dest}")
    return found[0]


def make_suite(sdist, root):
    """Extract the sdist's tests/ into root/tests and add the tiny testers."""
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/tests/" in m.name and m.isfile()]
        for m in members:
            m.name = m.name[m.name.index("/tests/") + 1:]
        tar.extractall(root, members=members, filter="data")
    tests = os.path.join(root, "tests")
    for rel, text in EMPTY_MIXINS.items():
        os.makedirs(os.path.join(tests, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(tests, rel), "w") as f:
            f.write(text)
    os.makedirs(os.path.join(tests, "models"), exist_ok=True)
    for pkg in ("", "exporters", "generation", "models"):
        open(os.path.join(tests, pkg, "__init__.py"), "a").close()
    shutil.copy(os.path.join(HERE, "client_suite", "test_tiny_models.py"), os.path.join(tests, "models"))
    return os.path.join(tests, "models", "test_tiny_models.py")


def run_suite(root, test_file, device, models, timeout):
    report = os.path.join(root, f"junit_{device}.xml")
    selector = " or ".join(CLASS_OF[m] for m in models)
    env = dict(os.environ, TRANSFORMERS_TEST_DEVICE=device, PYTHONPATH=root, **SINGLE_RANK_LAUNCH)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore", "-k", selector,
           f"--junitxml={report}", "-o", "junit_family=xunit1", test_file]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    tail = proc.stdout.strip().splitlines()[-1:] if proc.stdout else []
    print(f"[{device}] {wall:.1f} s wall; pytest: {tail[0] if tail else proc.stderr[-500:]}", flush=True)
    return parse_junit(report), wall


def parse_junit(path):
    """{test id: (outcome, seconds)} from a junit report."""
    results = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname').rsplit('.', 1)[-1]}::{case.get('name')}"
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = "failed" if tag in ("failure", "error") else "skipped"
        results[name] = (outcome, float(case.get("time", 0.0)))
    return results


def report(npu, cpu):
    both = [t for t in npu if npu[t][0] == "passed" and cpu.get(t, ("",))[0] == "passed"]
    npu_only = [t for t in npu if npu[t][0] == "passed" and cpu.get(t, ("",))[0] == "skipped"]
    differ = sorted(t for t in npu if t in cpu and npu[t][0] != cpu[t][0]
                    and {npu[t][0], cpu[t][0]} != {"passed", "skipped"})
    t_npu = sum(npu[t][1] for t in both)
    t_cpu = sum(cpu[t][1] for t in both)
    for device, res in (("npu", npu), ("cpu", cpu)):
        counts = {o: sum(1 for v in res.values() if v[0] == o) for o in ("passed", "failed", "skipped")}
        print(f"{device}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped, "
              f"{sum(v[1] for v in res.values()):.1f} s test time")
    print(f"\npassed on both: {len(both)} tests, npu {t_npu:.1f} s, cpu {t_cpu:.1f} s, "
          f"ratio npu/cpu {t_npu / max(t_cpu, 1e-9):.2f}x")
    print(f"ran on npu only (skipped on cpu): {len(npu_only)} tests, "
          f"{sum(npu[t][1] for t in npu_only):.1f} s")
    for t in npu_only:
        print(f"    {npu[t][1]:7.2f} s  {t}")
    if differ:
        print(f"\noutcome differs ({len(differ)}):")
        for t in differ:
            print(f"    npu {npu[t][0]:7s} cpu {cpu[t][0]:7s}  {t}")
    print("\ntop 20 by ratio (passed on both, cpu time >= 10 ms):")
    ranked = sorted((t for t in both if cpu[t][1] >= 0.01), key=lambda t: npu[t][1] / cpu[t][1], reverse=True)
    for t in ranked[:20]:
        print(f"    {npu[t][1] / cpu[t][1]:6.2f}x  npu {npu[t][1]:6.3f} s  cpu {cpu[t][1]:6.3f} s  {t}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {','.join(MODELS)}")
    ap.add_argument("--sdist", help="transformers source distribution (default: pip download the installed version)")
    ap.add_argument("--keep", help="build the suite in this folder and keep it (default: a temporary one)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per pytest run")
    args = ap.parse_args()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in CLASS_OF]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; choose from {','.join(MODELS)}")
    try:
        import transformers
    except ImportError:
        sys.exit("transformers is not installed: run scripts/setup_clients.sh first")
    install_test_requirements()
    root = args.keep or tempfile.mkdtemp(prefix="vnpu_client_suite_")
    os.makedirs(root, exist_ok=True)
    sdist = args.sdist or fetch_sdist(transformers.__version__, root)
    test_file = make_suite(sdist, root)
    print(f"transformers {transformers.__version__}, models {','.join(models)}, suite in {root}", flush=True)
    npu, _ = run_suite(root, test_file, "npu", models, args.timeout)
    cpu, _ = run_suite(root, test_file, "cpu", models, args.timeout)
    report(npu, cpu)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
