"""A C++ program on torch_npu's C++ API, without Python (torch_npu/csrc/libs/torch_npu.h).

Real torch_npu's own C++ test (test/cpp/api) is such a program: it names the
device in a namespace-scope object, before main, and calls init_npu /
finalize_npu around npu work. vNPU's library is torch_npu/_C.so under the
soname libtorch_npu.so (Note [The C++ API of extensions], csrc/CMakeLists.txt):
the program finds it by that name on its loader path.
"""

import os
import shutil
import subprocess
import sys
import sysconfig

import pytest
import torch

import torch_npu

PROGRAM = r'''
#include <torch/torch.h>
#include "torch_npu/csrc/libs/torch_npu.h"

#include <iostream>

auto device = at::Device("npu:0");  // before main: the backend's name is registered when the library loads

int main() {
  torch_npu::init_npu(device);
  auto x = torch::arange(12, torch::kFloat).reshape({3, 4});
  auto on_npu = x.to(device);
  auto y = torch::nn::functional::gelu(on_npu * 2 + 1).sum(1);
  bool same = y.device() == device && torch::allclose(y.cpu(), torch::nn::functional::gelu(x * 2 + 1).sum(1));
  torch_npu::finalize_npu();
  std::cout << (same ? "same" : "different") << std::endl;
  return same ? 0 : 1;
}
'''


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_cpp_program_runs_npu_work_without_python(tmp_path):
    torch_dir = os.path.dirname(torch.__file__)
    package = os.path.dirname(torch_npu.__file__)
    python_lib = sysconfig.get_config_var("LIBDIR")
    (tmp_path / "program.cpp").write_text(PROGRAM)
    loader_dir = tmp_path / "lib"
    loader_dir.mkdir()
    os.symlink(os.path.join(package, "_C.so"), loader_dir / "libtorch_npu.so")
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    build = subprocess.run(
        ["g++", "-std=c++17", "-O0", "program.cpp", "-o", "program", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
         f"-I{torch_dir}/include", f"-I{torch_dir}/include/torch/csrc/api/include", f"-I{package}/include",
         f"-L{package}/lib", f"-L{torch_dir}/lib", f"-L{python_lib}", f"-Wl,-rpath,{loader_dir}",
         f"-Wl,-rpath,{torch_dir}/lib", f"-Wl,-rpath,{python_lib}", "-ltorch_npu", "-ltorch", "-ltorch_cpu",
         "-lc10", f"-lpython{sys.version_info.major}.{sys.version_info.minor}", "-pthread"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_PRELOAD")}
    run = subprocess.run([str(tmp_path / "program")], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env=env)
    assert run.returncode == 0 and run.stdout.strip() == "same", run.stdout + run.stderr[-3000:]
