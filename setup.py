"""Builds torch_npu._C with CMake (scripts/build.sh) before packaging.

Install with `pip install --no-build-isolation -e .` (or without -e): the
build uses the torch already installed, never an isolated copy.
"""
import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


class BuildWithCMake(build_py):
    def run(self):
        env = dict(os.environ, PYTHON=sys.executable)
        if not os.environ.get("VNPU_SKIP_BUILD"):
            subprocess.check_call([os.path.join(ROOT, "scripts", "build.sh")], env=env)
        super().run()


setup(cmdclass={"build_py": BuildWithCMake}, package_data={"torch_npu": ["_C*.so"]})
