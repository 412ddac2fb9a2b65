#!/usr/bin/env python3
"""Runs real torch_npu's own Python tests (Ascend/pytorch `test/`), unchanged, against vNPU.

    python scripts/run_real_tests.py [--repo DIR] [--rev REV] [--work DIR] [--timeout S]
                                     [--build-cpp-extensions] TEST_PATH...

TEST_PATH is a file or directory under the snapshot's `test/` (e.g.
`test/cpp_extensions/test`). The snapshot (a git checkout or bare mirror of
Ascend/pytorch, default the one `fetch` made under /work/.mirror) is exported
to the work directory; nothing of it is copied into this repository.

How the real files are run:
- each test file in its own process (`python -m pytest FILE`, cwd its directory;
  a file pytest cannot collect, whose TestCase looks its test method up in
  `__init__` or whose module has generator functions named test*, runs as real
  torch_npu's CI runs it, `python FILE`, with each test's outcome recorded),
  bounded by --timeout seconds per file and, with --test-timeout, by that many
  seconds per test (pytest-timeout, ``pip install pytest-timeout``): a test that
  hangs then fails alone instead of voiding its file's counts. After each test
  the multiprocessing children it left running are killed, since the
  distributed tests spawn ranks that wait forever for a peer that failed and
  keep the fixed MASTER_PORT every test of the file rendezvous on;
- `torch_npu.testing` is the snapshot's package, not vNPU's: a meta path finder
  (installed by a sitecustomize on PYTHONPATH) serves `torch_npu.testing.*` from
  the export, while the rest of `torch_npu` is vNPU. Its one generated module,
  `_npu_testing_utils`, is rendered from `torchnpugen/templates` with the skip
  list of `test/unsupported_ops_info.yaml`, as torch_npu's build does;
- --with-disabled-list runs as the snapshot's test/README.md tells its own
  CI to: DISABLED_TESTS_FILE names `test/unsupported_test_cases/
  .pytorch-disabled-tests.json`, the tests (most of them PyTorch's own, in
  test_modules, test_ops, test_torch, ...) real torch_npu skips because they
  fail on its hardware. Without it those run too; report which figure you give;
- --build-cpp-extensions builds `test/cpp_extensions/setup.py` first, one
  extension at a time (so one that cannot build is reported and the others
  still build), in place, as the real suite's run_cpp_test does. Without
  the flag the same build runs when a selected file imports the
  extensions' package (`torch_test_cpp_extension`), as real torch_npu's
  run_test.py builds them before their tests: test_npu_aoti_shim.py would
  otherwise build them in its class setup (3.5 minutes on 2 cores), which
  counts against its first test's --test-timeout.

Some real test files import test-only packages of their own (expecttest,
ml_dtypes for the int4 quantisation tests): install them first
(``pip install expecttest ml_dtypes``), or those files count as collection
errors.

A test_* function a file imports from elsewhere (a helper of the snapshot's
torch_npu.testing) is not collected as one of its tests, as real torch_npu's
CI (unittest) never collects it.

A file stopped at --timeout counts the tests that finished before it (each
test's outcome is appended to a progress file as it is known) and is marked
TIMED OUT.

Prints per file: passed, failed, errors, skipped (from pytest's JUnit XML),
then totals per directory, and writes everything to WORK/results.json.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import io
import textwrap
import xml.etree.ElementTree as ET

DEFAULT_REPO = "/work/.mirror/Ascend+pytorch/repo"

SITECUSTOMIZE = '''
# Installed by vNPU's scripts/run_real_tests.py: torch_npu.testing comes from
# the real torch_npu snapshot, the rest of torch_npu from vNPU.
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_TESTING = {testing!r}


class _RealTestingFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch_npu.testing" and not fullname.startswith("torch_npu.testing."):
            return None
        rel = fullname.split(".")[2:]
        base = os.path.join(_TESTING, *rel)
        if os.path.isdir(base):
            init = os.path.join(base, "__init__.py")
            if not os.path.isfile(init):  # a namespace package (testing/_internal has no __init__)
                spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
                spec.submodule_search_locations = [base]
                return spec
            return importlib.util.spec_from_file_location(fullname, init, submodule_search_locations=[base])
        if os.path.isfile(base + ".py"):
            return importlib.util.spec_from_file_location(fullname, base + ".py")
        return None


sys.meta_path.insert(0, _RealTestingFinder())


class _RunTestsDefaults(importlib.abc.MetaPathFinder):
    """torch's common_utils sets GRAPH_EXECUTOR in run_tests() (the files'
    `python FILE` entry point), which pytest never calls: set it to
    run_tests()'s default when the module is loaded, so the JIT tests run as
    their authors run them."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch.testing._internal.common_utils":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_default(module):
            exec_module(module)
            if getattr(module, "GRAPH_EXECUTOR", None) is None:
                module.GRAPH_EXECUTOR = module.cppProfilingFlagsToProfilingMode()
        spec.loader.exec_module = exec_and_default
        return spec


sys.meta_path.insert(0, _RunTestsDefaults())
'''

# A pytest plugin (-p vnpu_reap_children): after each test, the processes it
# spawned and left running are killed. Except between two tests of one
# MultiProcContinuousTest class: its ranks are started once for the class and
# serve every test of it (reaping them there made each class's second test
# wait for ranks that were gone, until its timeout).
REAP_CHILDREN = '''
import multiprocessing


def _continuous_class(item):
    cls = getattr(item, "cls", None)
    try:
        from torch.testing._internal.common_distributed import MultiProcContinuousTest
    except ImportError:
        return None
    return cls if cls is not None and issubclass(cls, MultiProcContinuousTest) else None


def kill_children():
    for child in multiprocessing.active_children():
        child.kill()
        child.join(10)


def pytest_runtest_teardown(item, nextitem):
    cls = _continuous_class(item)
    if cls is not None and nextitem is not None and getattr(nextitem, "cls", None) is cls:
        return
    kill_children()


def pytest_collection_modifyitems(config, items):
    # A helper named test_* that the file imports from elsewhere (the snapshot's
    # common_utils.test_2args_broadcast) is not one of its tests: real torch_npu's
    # CI runs the file with unittest, which never collects module functions.
    import inspect
    kept = []
    for item in items:
        function = getattr(item, "function", None)
        module = getattr(item, "module", None)
        if getattr(item, "cls", None) is None and inspect.isfunction(function) and module is not None and \
                function.__module__ != module.__name__:
            continue
        kept.append(item)
    items[:] = kept


def pytest_runtest_logreport(report):
    # Each test's outcome as it is known (the JUnit report is written only at
    # the end): a file stopped at its time bound still counts what ran.
    import json
    import os
    path = os.environ.get("VNPU_PROGRESS_FILE")
    if not path or not (report.when == "call" or report.outcome != "passed"):
        return
    outcome = {"passed": "passed", "skipped": "skipped"}.get(report.outcome,
                                                             "failed" if report.when == "call" else "errors")
    message = "" if report.outcome == "passed" else str(report.longrepr)[-300:]
    with open(path, "a") as f:
        f.write(json.dumps({"node": report.nodeid, "outcome": outcome, "message": message}) + "\\n")
'''

# The way real torch_npu's own CI runs a file (`python FILE`: its run_tests()
# calls unittest.main), for the files pytest cannot collect: TestCases whose
# __init__ looks its test method up by name (pytest makes one with "runTest"),
# module-level generator functions named test*. Each test's outcome is written
# as JSON; children a test left running are killed after it (REAP_CHILDREN's
# kill_children, from the same overlay folder).
RUN_AS_MAIN = '''
import json
import os
import runpy
import sys
import unittest

from vnpu_reap_children import kill_children

path, out = sys.argv[1], sys.argv[2]
deselected = set(sys.argv[3:])  # "Class.test_name", as NOT_RUN names them
records = []
_names = unittest.TestLoader.getTestCaseNames


def _names_not_deselected(loader, case_class):
    return [n for n in _names(loader, case_class) if f"{case_class.__name__}.{n}" not in deselected]


unittest.TestLoader.getTestCaseNames = _names_not_deselected


class _Recorder(unittest.TextTestResult):
    def _record(self, test, outcome, message=""):
        records.append({"name": test.id(), "outcome": outcome, "message": message[:300]})

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test).strip().splitlines()[-1])

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "errors", self._exc_info_to_string(err, test).strip().splitlines()[-1])

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "passed")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")

    def stopTest(self, test):
        super().stopTest(test)
        kill_children()


_main = unittest.main


def _recorded_main(*args, **kwargs):
    kwargs["testRunner"] = unittest.TextTestRunner(resultclass=_Recorder, verbosity=2)
    kwargs["exit"] = False
    return _main(*args, **kwargs)


unittest.main = _recorded_main
sys.argv = [path]
sys.path.insert(0, os.path.dirname(os.path.abspath(path)))  # as `python FILE` puts the file's folder first
try:
    runpy.run_path(path, run_name="__main__")
finally:
    with open(out, "w") as f:
        json.dump(records, f)
'''

# pytest's collection errors that come from pytest itself, not from the file.
PYTEST_ONLY_COLLECTION_ERRORS = ("has no attribute 'runTest'", "'yield' keyword is allowed in fixtures, but not in tests",
                                 # a TestCase class made with type(name, bases, dict(OtherClass.__dict__)):
                                 # its copied __dict__ descriptor breaks pytest's dir() (test/onnx)
                                 "descriptor '__dict__' for")

BUILD_EACH = '''
# Builds the extensions of a setup.py one at a time (vNPU's run_real_tests.py).
import sys
import setuptools

results = {}
_real_setup = setuptools.setup


def _setup(**kwargs):
    modules = kwargs.pop("ext_modules", [])
    for ext in modules:
        sys.argv = ["setup.py", "build_ext", "--inplace"]
        try:
            _real_setup(ext_modules=[ext], **kwargs)
            results[ext.name] = "built"
        except BaseException as e:  # setuptools exits with SystemExit on errors
            results[ext.name] = f"failed: {type(e).__name__}: {e}"


setuptools.setup = _setup
sys.argv = ["setup.py", "build_ext", "--inplace"]
exec(compile(open("setup.py").read(), "setup.py", "exec"), {"__name__": "__main__", "__file__": "setup.py"})
for name, result in results.items():
    print(f"[build] {name}: {result}", flush=True)
'''


def export(repo, rev, work):
    """Exports test/, torch_npu/testing, torchnpugen and the sources the tests' builds name."""
    git_dir = repo if os.path.isdir(os.path.join(repo, "objects")) else os.path.join(repo, ".git")
    paths = ["test", "torch_npu/testing", "torchnpugen", "torch_npu/csrc/inductor/aoti_torch", "third_party/acl"]
    data = subprocess.run(["git", "--git-dir", git_dir, "archive", rev, *paths], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(work)


# Files of real torch_npu's git submodules that its tests read (git archive
# leaves submodules out): test/npu/test_public_bindings.py adds op-plugin's and
# torchair's allowlists of public names to its own. Each comes from that
# submodule's mirror (what `fetch` made under /work/.mirror) at the commit the
# snapshot pins. A mirror that lacks the pinned commit gives its newest commit
# not after the snapshot's, and the runner says so; no mirror, no file (the
# test then warns and runs with its own allowlist only).
SUBMODULE_FILES = (
    ("third_party/op-plugin", "/work/.mirror/Ascend+op-plugin/repo", "test/allowlist_for_publicAPI.json"),
    ("third_party/torchair/torchair", "/work/.mirror/Ascend+torchair/repo", "tests/st/allowlist_for_publicAPI.json"),
)


def export_submodule_files(repo, rev, work):
    """Writes SUBMODULE_FILES into the work directory; returns where each came from."""
    git_dir = repo if os.path.isdir(os.path.join(repo, "objects")) else os.path.join(repo, ".git")
    provenance = {}
    for submodule, mirror, path in SUBMODULE_FILES:
        target = os.path.join(work, submodule, path)
        pinned = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", f"{rev}:{submodule}"],
                                capture_output=True, text=True).stdout.strip()
        if not pinned or not os.path.isdir(mirror):
            provenance[submodule] = f"not exported: {'no mirror at ' + mirror if pinned else 'not a submodule here'}"
            continue
        commit, note = pinned, "the pinned commit"
        if subprocess.run(["git", "--git-dir", mirror, "cat-file", "-e", pinned + "^{commit}"],
                          capture_output=True).returncode != 0:
            snapshot_date = subprocess.run(["git", "--git-dir", git_dir, "log", "-1", "--format=%cI", rev],
                                           capture_output=True, text=True).stdout.strip()
            commit = subprocess.run(["git", "--git-dir", mirror, "rev-list", "-1", f"--before={snapshot_date}",
                                     "HEAD"], capture_output=True, text=True).stdout.strip()
            note = f"the mirror lacks the pinned commit {pinned}: its newest commit before the snapshot's"
        data = subprocess.run(["git", "--git-dir", mirror, "show", f"{commit}:{path}"], capture_output=True).stdout
        if not commit or not data:
            provenance[submodule] = f"not exported: {path} not at {commit or 'any commit'} of {mirror}"
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data)
        provenance[submodule] = f"{path} at {commit} ({note})"
    return provenance


def provide_cann_libraries(work):
    """Puts vNPU's ACL runtime where the tests link CANN's: test/allocator and
    test/npu link -lascendcl from third_party/acl/libs, which on a machine
    with CANN holds the stubs build_stub.sh compiles against CANN's ACL
    headers (a submodule the snapshot lacks). Here vNPU is the CANN runtime:
    libascendcl.so is a linker script naming torch_npu/_C.so, and
    build_stub.sh, which the tests run first, only writes it again."""
    import torch_npu
    libs = os.path.join(work, "third_party", "acl", "libs")
    os.makedirs(libs, exist_ok=True)
    script = f"INPUT({os.path.join(os.path.dirname(torch_npu.__file__), '_C.so')})"
    with open(os.path.join(libs, "libascendcl.so"), "w") as f:
        f.write(script + "\n")
    with open(os.path.join(libs, "build_stub.sh"), "w") as f:
        f.write("#!/bin/sh\n# vNPU's run_real_tests.py: vNPU provides libascendcl (no CANN stubs to build).\n"
                f"echo '{script}' > \"$(dirname \"$0\")/libascendcl.so\"\n")


def render_testing_utils(work):
    """Writes torch_npu/testing/_npu_testing_utils.py from its template, with the
    skip list built from test/unsupported_ops_info.yaml (what torchnpugen does)."""
    import yaml
    from torchgen.code_template import CodeTemplate

    import ast
    source = open(os.path.join(work, "torchnpugen", "codegen_ops_info.py")).read()
    class2test = None
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "class2test" for t in node.targets):
            class2test = ast.literal_eval(node.value)
    unsupported_path = os.path.join(work, "test", "unsupported_ops_info.yaml")
    unsupported = {}
    if os.path.exists(unsupported_path):
        with open(unsupported_path) as f:
            unsupported = yaml.safe_load(f) or {}
    skips = {}
    for op_name, funcs in unsupported.items():
        for func_name, dtypes in funcs.items():
            class_name = next(c for c, names in class2test.items() if func_name in names)
            for dtype in dtypes:
                where = f"'{class_name}', '{func_name}'" + (f", dtypes=(torch.{dtype},)" if dtype else "")
                skips.setdefault(op_name, []).append(f'\nDecorateInfo(unittest.skip("npu test skipped!"), {where})')
    entry = CodeTemplate("""\n'${op_name}': [${decorators}]""")
    template = CodeTemplate.from_file(os.path.join(work, "torchnpugen", "templates", "npu_testing_utils.py"))
    text = template.substitute(skip_detail=[entry.substitute(op_name=op, decorators=d) for op, d in skips.items()])
    with open(os.path.join(work, "torch_npu", "testing", "_npu_testing_utils.py"), "w") as f:
        f.write(text)


def build_cpp_extensions(work, env, timeout):
    cwd = os.path.join(work, "test", "cpp_extensions")
    driver = os.path.join(work, "_vnpu_overlay", "build_each.py")
    with open(driver, "w") as f:
        f.write(BUILD_EACH)
    run = subprocess.run([sys.executable, driver], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    built = {}
    for line in run.stdout.splitlines():
        if line.startswith("[build] "):
            name, _, result = line[len("[build] "):].partition(": ")
            built[name] = result
    if not built:
        built["<setup.py>"] = "failed: " + (run.stderr or run.stdout)[-2000:]
    return built


def selected_files(work, paths):
    files = []
    for p in paths:
        full = os.path.join(work, p)
        if os.path.isdir(full):
            for root, _, names in os.walk(full):
                files += [os.path.join(root, n) for n in sorted(names) if n.startswith("test") and n.endswith(".py")]
        else:
            files.append(full)
    return files


def imports_cpp_extensions(path):
    """Whether a test file loads real torch_npu's test extensions (built from `test/cpp_extensions`)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "torch_test_cpp_extension" in f.read()
    except OSError:
        return False


# Tests not run: they write more host memory than this machine has (the
# virtual NPU's HBM is host RAM), so the kernel's OOM killer would end the
# whole file's process, and the other tests of the file with it. Each is
# listed in docs/fidelity.md with this reason; they count as not run.
HOST_MEMORY_BOUND = {
    # Writes two 64 GiB tensors (the 910B's HBM): expects real torch_npu's out-of-memory error.
    "test/npu/test_fault_mode.py::TestMode::test_aclrtMallocAlign32",
    # Spawns 100 processes that each import torch and torch_npu (about 300 MiB each).
    "test/npu/test_fault_mode.py::TestMode::test_aclrtSetDevice",
    # Copies an 8 GiB tensor to a second device, then both to the host: 32 GiB.
    "test/npu/test_ipc_event.py::Test_ipc_event::test_d2d_copy3",
    # With the suite's WORLD_SIZE of 8, rank i makes 4 x 10^(i+1) floats (rank 7: 1.6 GB) and every rank
    # concatenates all ranks' inputs (0.9 GB): the kernel's OOM killer ends ranks on a 24 GiB host.
    "test/distributed/test_distributed.py::TestDistBackend::"
    "test_DistributedDataParallel_SyncBatchNorm_Diff_Input_Sizes_Running_Value",
    # The file's parent holds a 4 GiB tensor (torch.rand(1024, 1024, 1024)) that 3 rpc workers share; worker0
    # copies it to its npu and sends it to two workers, each receiving a CPU copy and moving it to its npu:
    # about 32 GiB at once (the parent pytest process is the one the OOM killer ends).
    "test/distributed/rpc/test_single_machine_multi_devices.py::TestRpc::test_remote_rref",
    "test/distributed/rpc/test_single_machine_multi_devices.py::TestRpc::test_async_execution",
}


# Tests not run: they crash the process inside real torch_npu's own source,
# which the test compiles into its extension from the snapshot (the AOTI shim,
# torch_npu/csrc/inductor/aoti_torch/shim_npu.cpp): they pass a null output
# handle that this snapshot's shim writes through (the test expects a failure
# code, which a later shim must return). A crash would end the whole file's
# process. Listed in docs/fidelity.md; they count as not run.
CRASH_IN_SNAPSHOT_SOURCE = {
    "test/_inductor/test_npu_aoti_shim.py::TestNpuAOTIShim::" + name for name in (
        "test_null_allocator_output_handle_returns_failure_internally",
        "test_null_current_stream_output_handle_returns_failure_internally",
        "test_null_guard_output_handle_returns_failure_internally",
        "test_null_stream_guard_output_handle_returns_failure_internally")
}
NOT_RUN = HOST_MEMORY_BOUND | CRASH_IN_SNAPSHOT_SOURCE

# Files that real torch_npu's test/run_test.py runs with an environment of
# their own (its run_distributed_test): torch's distributed test suite reads
# BACKEND, TEMP_DIR (with barrier/ and test_dir/ in it), INIT_METHOD and
# WORLD_SIZE (the largest power of two up to the device count).
DISTRIBUTED_SUITE = {"test/distributed/test_distributed.py"}


def distributed_suite_env(env, temp_dir):
    import math
    count = subprocess.run([sys.executable, "-c", "import torch, torch_npu; print(torch.npu.device_count())"],
                           env=env, capture_output=True, text=True, timeout=300).stdout.strip().splitlines()[-1]
    for sub in ("barrier", "test_dir"):
        os.makedirs(os.path.join(temp_dir, sub), exist_ok=True)
    return dict(env, BACKEND="hccl", TEMP_DIR=temp_dir, INIT_METHOD="env://",
                WORLD_SIZE=str(2 ** math.floor(math.log2(max(int(count), 1)))))


def run_in_own_group(cmd, cwd, env, timeout):
    """subprocess.run(cmd, capture_output=True, text=True, timeout=timeout) in a
    session of its own, whose every process is killed when it ends: ranks and
    workers a test spawned outlive a file's process that the OOM killer ended
    (the reaper plugin runs in that process) and would hold their memory, and
    the ports their peers wait on, through the files after it."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as e:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, _ = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, output=stdout) from e
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def run_file(path, env, timeout, rel, test_timeout=None):
    if rel in DISTRIBUTED_SUITE:
        import tempfile
        env = distributed_suite_env(env, tempfile.mkdtemp(prefix="vnpu-dist-suite-"))
    xml = path + ".vnpu-junit.xml"
    progress = path + ".vnpu-progress.jsonl"
    for stale in (xml, progress):
        if os.path.exists(stale):
            os.remove(stale)
    env = dict(env, VNPU_PROGRESS_FILE=progress)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "vnpu_reap_children",
           os.path.basename(path), f"--junitxml={xml}"]
    returncode = None
    if test_timeout:
        cmd += [f"--timeout={test_timeout:g}", "--timeout-method=signal"]
    for test in sorted(NOT_RUN):
        if test.startswith(rel + "::"):
            cmd += ["--deselect", os.path.basename(path) + test[len(rel):]]
    try:
        proc = run_in_own_group(cmd, os.path.dirname(path), env, timeout)
        output = proc.stdout[-6000:] + proc.stderr[-3000:]
        returncode = proc.returncode
        timed_out = False
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"")[-6000:].decode(errors="replace") if isinstance(e.stdout, bytes) else str(e.stdout)
        timed_out = True
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "timed_out": timed_out}
    cases = []
    if os.path.exists(xml):
        for case in ET.parse(xml).getroot().iter("testcase"):
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = {"failure": "failed", "error": "errors", "skipped": "skipped"}[child.tag]
                    message = (child.get("message") or "")[:300]
                    break
            else:
                message = ""
            counts[outcome] += 1
            cases.append({"name": f"{case.get('classname')}.{case.get('name')}", "outcome": outcome,
                          "message": message})
    if timed_out and not cases and os.path.exists(progress):
        # Stopped at the file's bound: the tests that finished count, from the progress file.
        seen = {}
        with open(progress) as f:
            for line in f:
                entry = json.loads(line)
                seen[entry["node"]] = entry  # a later phase's failure (teardown) replaces the call's pass
        for node, entry in seen.items():
            counts[entry["outcome"]] += 1
            classname, _, name = node.rpartition("::")
            module = os.path.splitext(os.path.basename(path))[0]
            cases.append({"name": ".".join([module] + classname.split("::")[1:] + [name]),
                          "outcome": entry["outcome"], "message": entry["message"]})
    if not timed_out and not cases and returncode not in (0, 5):  # 5: no tests collected
        # The process died before pytest wrote its report (a crash, the OOM killer): the file counts as one error.
        counts["errors"] = 1
        cases.append({"name": rel, "outcome": "errors",
                      "message": f"the test process ended with status {returncode} before pytest's report"})
    if not timed_out and counts["errors"] and not counts["passed"] and not counts["failed"] and \
            any(marker in output for marker in PYTEST_ONLY_COLLECTION_ERRORS):
        return run_file_as_main(path, env, timeout, rel)
    return counts, cases, output


def run_file_as_main(path, env, timeout, rel):
    """Runs the file as real torch_npu's CI does (`python FILE`), recording each test (RUN_AS_MAIN)."""
    out = path + ".vnpu-unittest.json"
    if os.path.exists(out):
        os.remove(out)
    runner = os.path.join(env["PYTHONPATH"].split(os.pathsep)[0], "vnpu_run_as_main.py")
    deselected = [t[len(rel) + 2:].replace("::", ".") for t in sorted(NOT_RUN) if t.startswith(rel + "::")]
    try:
        proc = run_in_own_group([sys.executable, runner, os.path.basename(path), out, *deselected],
                                os.path.dirname(path), env, timeout)
        output = "[run as `python FILE`: pytest cannot collect it]\n" + proc.stdout[-6000:] + proc.stderr[-3000:]
        timed_out = False
    except subprocess.TimeoutExpired:
        output, timed_out = "[run as `python FILE`]", True
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "timed_out": timed_out}
    cases = []
    if os.path.exists(out):
        with open(out) as f:
            cases = json.load(f)
        for case in cases:
            counts[case["outcome"]] += 1
    if not cases and not timed_out:
        counts["errors"] = 1  # the file did not run: count it as one error, as a collection error
    return counts, cases, output


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--repo", default=DEFAULT_REPO)
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--work", default="/tmp/vnpu-real-tests")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per test file")
    parser.add_argument("--test-timeout", type=float, default=None,
                        help="seconds per test (needs pytest-timeout); a test past it fails")
    parser.add_argument("--build-cpp-extensions", action="store_true")
    parser.add_argument("--with-disabled-list", action="store_true",
                        help="skip the tests real torch_npu's own CI disables (its DISABLED_TESTS_FILE)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each failing test and its message")
    args = parser.parse_args()

    work = os.path.abspath(args.work)
    if not os.path.exists(os.path.join(work, "test")):
        os.makedirs(work, exist_ok=True)
        export(args.repo, args.rev, work)
        render_testing_utils(work)
    provide_cann_libraries(work)
    submodule_files = export_submodule_files(args.repo, args.rev, work)
    for submodule, source in submodule_files.items():
        print(f"{submodule}: {source}")
    overlay = os.path.join(work, "_vnpu_overlay")
    os.makedirs(overlay, exist_ok=True)
    with open(os.path.join(overlay, "sitecustomize.py"), "w") as f:
        f.write(SITECUSTOMIZE.format(testing=os.path.join(work, "torch_npu", "testing")))
    with open(os.path.join(overlay, "vnpu_reap_children.py"), "w") as f:
        f.write(REAP_CHILDREN)
    with open(os.path.join(overlay, "vnpu_run_as_main.py"), "w") as f:
        f.write(RUN_AS_MAIN)
    if args.test_timeout:
        import importlib.util
        if importlib.util.find_spec("pytest_timeout") is None:
            parser.error("--test-timeout needs pytest-timeout: pip install pytest-timeout")
    env = dict(os.environ)
    # One hash seed for every run (unless one is given): messages that print a
    # set (test_config's missing keys) then name the same element first in this
    # run and in scripts/classify_real_failures.py's run without vNPU.
    env.setdefault("PYTHONHASHSEED", "0")
    # A PYTHONPATH given (a vNPU checkout that is not the installed one) comes after the overlay.
    env["PYTHONPATH"] = os.pathsep.join([overlay, os.path.join(work, "test", "cpp_extensions")] +
                                        ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))

    if args.with_disabled_list:
        env["DISABLED_TESTS_FILE"] = os.path.join(work, "test", "unsupported_test_cases",
                                                  ".pytorch-disabled-tests.json")

    results = {"build": {}, "submodule_files": submodule_files, "files": {}}
    files = selected_files(work, args.paths)
    if args.build_cpp_extensions or any(map(imports_cpp_extensions, files)):
        results["build"] = build_cpp_extensions(work, env, timeout=1800)
        for name, result in results["build"].items():
            print(f"build {name}: {result[:400]}")

    totals = {}
    for path in sorted(files):
        rel = os.path.relpath(path, work)
        counts, cases, output = run_file(path, env, args.timeout, rel, args.test_timeout)
        results["files"][rel] = {"counts": counts, "cases": cases, "output_tail": output[-3000:]}
        ran = counts["passed"] + counts["failed"] + counts["errors"]
        print(f"{rel}: {counts['passed']}/{ran} passed, {counts['failed']} failed, {counts['errors']} errors, "
              f"{counts['skipped']} skipped" + (" (TIMED OUT)" if counts["timed_out"] else ""))
        if args.verbose:
            for case in cases:
                if case["outcome"] in ("failed", "errors"):
                    print(f"    {case['outcome']}: {case['name']}: {case['message'][:200]}")
            if not cases:
                print(textwrap.indent(output[-1500:], "    "))
        directory = os.path.dirname(rel)
        t = totals.setdefault(directory, {"passed": 0, "ran": 0, "skipped": 0})
        t["passed"] += counts["passed"]
        t["ran"] += ran
        t["skipped"] += counts["skipped"]
    for directory, t in sorted(totals.items()):
        rate = 100.0 * t["passed"] / t["ran"] if t["ran"] else 0.0
        print(f"== {directory}: {t['passed']}/{t['ran']} passed ({rate:.1f}%), {t['skipped']} skipped")
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
