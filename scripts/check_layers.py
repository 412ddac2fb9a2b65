#!/usr/bin/env python3
"""Enforces the layering that the build is made of; run by CMake on every build.

    runtime/   C++17, the virtual device: includes only itself and the
               standard library (no torch, no csrc).
    csrc/core  the adaptor's foundation: runtime (as <vnpu/...>), torch, core.
    csrc/launch  the launch machinery (two stages, the routes an op can take,
               CPU fallback, strict mode): core and launch.
    csrc/ops   kernels (+ csrc/amp, the generated kernels): core, launch and ops.
    csrc/distributed  the hccl backend, a sibling of ops: core, launch, c10d.
    csrc/graph   graph mode (compiled kernels on streams), a sibling of ops: core, launch.
    csrc/profiler  device activity for torch.profiler (Kineto): core and the runtime's trace hook.
    csrc/api   torch_npu's public C++ API and the ACL runtime API for
               extensions (torch_npu/include): core, launch, graph, the
               runtime (as <vnpu/...>) and the public headers.
    csrc/opapi CANN's aclnn operator API (aclnnXxx, aclCreateTensor ...) and NNAL's ATB:
               core, the api layer's ACL status helpers, the public headers.
    torch_npu/include, torch_npu/_cann/include  the public headers extensions compile against: torch
               and themselves only (no csrc/, no vnpu/).
    csrc/python  the bindings: everything below, but the runtime only through
               the adaptor (no vnpu::Runtime, vnpu::Device or <vnpu/runtime.h>).

Dependencies point one way: python -> (ops, distributed, graph) -> launch -> core -> runtime. A violation
fails the build with the file, the line and the rule it breaks.
"""

import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')

# layer -> (directories, include prefixes it must not use)
TORCH = ("ATen/", "c10/", "torch/", "caffe2/", "pybind11/", "Python.h")
RULES = {
    "runtime": (["runtime/include", "runtime/src", "runtime/tests"], TORCH + ("csrc/",)),
    "core": (["csrc/core"], ("csrc/api/", "csrc/launch/", "csrc/ops/", "csrc/amp/", "csrc/python/", "csrc/distributed/", "csrc/graph/",
                             "runtime/include/")),
    "launch": (["csrc/launch"], ("csrc/api/", "csrc/ops/", "csrc/amp/", "csrc/python/", "csrc/distributed/", "csrc/graph/",
                                 "csrc/profiler/", "runtime/include/", "pybind11/", "Python.h")),
    "ops": (["csrc/ops", "csrc/amp"], ("csrc/api/", "csrc/python/", "csrc/distributed/", "csrc/graph/", "runtime/include/")),
    "distributed": (["csrc/distributed"], ("csrc/api/", "csrc/python/", "csrc/ops/", "csrc/amp/", "runtime/include/", "pybind11/",
                                           "Python.h")),
    "graph": (["csrc/graph"], ("csrc/api/", "csrc/python/", "csrc/ops/", "csrc/amp/", "csrc/distributed/", "runtime/include/",
                               "pybind11/", "Python.h")),
    "profiler": (["csrc/profiler"], ("csrc/api/", "csrc/python/", "csrc/distributed/", "csrc/graph/", "csrc/launch/", "csrc/ops/",
                                     "runtime/include/",
                                     "pybind11/", "Python.h")),
    "api": (["csrc/api"], ("csrc/ops/", "csrc/amp/", "csrc/python/", "csrc/distributed/", "csrc/profiler/",
                           "runtime/include/", "pybind11/", "Python.h")),
    "opapi": (["csrc/opapi"], ("csrc/launch/", "csrc/ops/", "csrc/amp/", "csrc/python/", "csrc/distributed/", "csrc/graph/",
                               "csrc/profiler/", "runtime/include/", "pybind11/", "Python.h")),
    "public headers": (["torch_npu/include", "torch_npu/_cann/include", "torch_npu/_cann/nnal/atb/include"], ("csrc/", "vnpu/", "runtime/", "pybind11/", "Python.h")),
    "python": (["csrc/python"], ("runtime/include/", "vnpu/runtime.h", "vnpu/stream.h")),
}
# Names the bindings may not touch: they reach the runtime through csrc/core.
PYTHON_FORBIDDEN_NAMES = re.compile(r"\bvnpu::(Runtime|Device|Stream)\b")


def violations(root):
    for layer, (dirs, forbidden) in RULES.items():
        for d in dirs:
            for path in sorted((root / d).rglob("*")):
                if path.suffix not in (".h", ".cpp"):
                    continue
                rel = path.relative_to(root)
                for number, line in enumerate(path.read_text().splitlines(), 1):
                    m = INCLUDE.match(line)
                    if m and m.group(1).startswith(forbidden):
                        yield f"{rel}:{number}: layer '{layer}' must not include <{m.group(1)}>"
                    if layer == "python" and PYTHON_FORBIDDEN_NAMES.search(line):
                        yield f"{rel}:{number}: bindings must reach the runtime through csrc/core, not {line.strip()}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=pathlib.Path, default=ROOT, help="the repository to check (default: this one)")
    problems = list(violations(parser.parse_args().root))
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check_layers: {len(problems)} layering violation(s); see scripts/check_layers.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
