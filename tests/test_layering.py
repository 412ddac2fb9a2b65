"""The build's layering check (scripts/check_layers.py) passes on this tree
and catches each kind of violation it exists for."""

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_layers.py"


def check(root):
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)], capture_output=True, text=True)


def test_this_tree_is_layered():
    r = check(ROOT)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("path,line,rule", [
    ("runtime/src/stream.cpp", "#include <ATen/core/Tensor.h>", "layer 'runtime' must not include"),
    ("csrc/core/npu_hooks.cpp", '#include "csrc/launch/launch.h"', "layer 'core' must not include"),
    ("csrc/ops/copy.cpp", '#include "csrc/python/module.h"', "layer 'ops' must not include"),
    ("csrc/python/module.cpp", "auto& d = vnpu::Runtime::instance();", "bindings must reach the runtime"),
    ("csrc/distributed/process_group_hccl.cpp", "#include <pybind11/pybind11.h>",
     "layer 'distributed' must not include"),
    ("csrc/launch/launch.cpp", '#include "csrc/distributed/process_group_hccl.h"', "layer 'launch' must not include"),
    ("csrc/launch/launch.cpp", '#include "csrc/ops/copy.h"', "layer 'launch' must not include"),
    ("csrc/distributed/process_group_hccl.cpp", '#include "csrc/ops/copy.h"', "layer 'distributed' must not include"),
    ("csrc/graph/npu_graph.cpp", '#include "csrc/ops/copy.h"', "layer 'graph' must not include"),
])
def test_violations_fail_the_check(tmp_path, path, line, rule):
    file = tmp_path / path
    file.parent.mkdir(parents=True)
    file.write_text("// a file of the layer\n" + line + "\n")
    r = check(tmp_path)
    assert r.returncode == 1
    assert f"{path}:2: {rule}" in r.stderr, r.stderr
