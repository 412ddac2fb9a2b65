"""`pip wheel .` builds a wheel that installs and runs elsewhere (docs/building.md).

The wheel is built from this checkout (the build is incremental: the
extension is already built) and installed into a fresh virtual environment
that sees the system's torch but not this checkout; the check runs from a
folder outside it.
"""

import glob
import os
import subprocess
import sys
import textwrap
import zipfile

from conftest import clean_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_wheel_installs_into_another_environment_and_runs(tmp_path):
    dist = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", ROOT, "--no-build-isolation", "--no-deps",
                            "-q", "-w", str(dist)], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    wheels = glob.glob(str(dist / "torch_npu-*.whl"))
    assert len(wheels) == 1 and wheels[0].endswith("-linux_x86_64.whl"), wheels
    with zipfile.ZipFile(wheels[0]) as wheel:  # npu-smi: its script and its torch-free library
        names = wheel.namelist()
    assert "torch_npu/lib/libvnpu_smi.so" in names
    assert any(n.endswith(".data/scripts/npu-smi") for n in names), [n for n in names if ".data/" in n]

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True, timeout=120)
    python = str(venv / "bin" / "python")
    # The outer pip installs into the venv's site-packages: no pip inside the venv needed.
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site, wheels[0]],
                             capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]

    check = subprocess.run([python, "-c", textwrap.dedent("""
        import importlib.metadata as md, os, torch
        x = torch.ones(3, device="npu")  # torch autoloads torch_npu through the wheel's entry point
        import torch_npu
        print(os.path.dirname(torch_npu.__file__))
        print(float((x * 2).sum()), md.version("torch_npu") == torch_npu.__version__)
        from torch_npu.tools import op_coverage  # reads torch_npu/tools/data
        print(len(op_coverage.__doc__) > 0, os.path.isfile(os.path.join(os.path.dirname(torch_npu.__file__), "tools", "data", "npu_native_ops.txt")))
        # what C++ extensions build against: the public headers and libtorch_npu.so
        root = os.path.dirname(torch_npu.__file__)
        print(all(os.path.isfile(os.path.join(root, p)) for p in (
            "include/torch_npu/csrc/core/npu/NPUStream.h", "include/third_party/acl/inc/acl/acl_rt.h",
            "include/ascendc/kernel_operator.h", "lib/libtorch_npu.so",
            "include/torch_npu/csrc/inductor/aoti_torch/generated/c_shim_npu.h")))
        """)], capture_output=True, text=True, timeout=300, cwd=str(tmp_path), env=clean_env())
    assert check.returncode == 0, check.stderr[-3000:]
    where, values, data, headers = check.stdout.strip().splitlines()[-4:]
    assert where == os.path.join(site, "torch_npu"), where  # the wheel's copy, not this checkout
    assert values == "6.0 True"
    assert data == "True True"
    assert headers == "True"
