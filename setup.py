"""Builds torch_npu._C with CMake (scripts/build.sh) before packaging.

Install with `pip install --no-build-isolation -e .` (or without -e): the
build uses the torch already installed, never an isolated copy.
"""
import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))


class BuildWithCMake(build_py):
    def run(self):
        env = dict(os.environ, PYTHON=sys.executable)
        if not os.environ.get("VNPU_SKIP_BUILD"):
            subprocess.check_call([os.path.join(ROOT, "scripts", "build.sh")], env=env)
        super().run()


class BinaryDistribution(Distribution):
    """The package ships a compiled extension: wheels are platform-specific."""

    def has_ext_modules(self):
        return True


# npu-smi is a script, not a console entry point: an entry point would import
# torch_npu (and torch) before running (torch_npu/tools/npu-smi).
setup(cmdclass={"build_py": BuildWithCMake}, distclass=BinaryDistribution,
      scripts=["torch_npu/tools/npu-smi"],
      package_data={"torch_npu": ["_C*.so", "_cann/*", "_cann/lib64/*.so", "_cann/include/**/*.h", "_cann/nnal/atb/lib/*.so",
                                  "_cann/nnal/atb/include/atb/*.h", "_cann/python/site-packages/acl/*.py",
                                  "tools/data/*.txt",
                                  "contrib/apis_config.json",
                                  # the C++ API extensions build against (docs/custom_ops.md)
                                  "lib/libtorch_npu.so", "lib/libascendcl.so", "lib/libvnpu_smi.so", "include/**/*.h", "include/**/*.hpp"]})
