# Builds the custom operator: python setup.py build_ext --inplace
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension

from torch_npu.utils.cpp_extension import NpuExtension

setup(name="custom_ops",
      ext_modules=[NpuExtension("custom_ops_lib", ["add_custom_op.cpp", "add_custom.asc"])],
      cmdclass={"build_ext": BuildExtension})
