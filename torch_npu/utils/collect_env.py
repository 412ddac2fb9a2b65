"""``python -m torch_npu.utils.collect_env``: the environment report real
torch_npu prints (PyTorch's, with the torch_npu version and the CANN version),
followed by the virtual devices this process sees.

The module's names are real torch_npu's: ``SystemEnv`` (the report's fields),
``get_env_info()`` / ``pretty_str()`` / ``get_pretty_env_info()``, the path
checks, and ``TORCH_AVAILABLE`` / ``TORCH_NPU_AVAILABLE`` with the ``torch`` and
``torch_npu`` it imported (tests replace them to see the "N/A" answers).
"""

import collections
import os
import re
import site
import sys
import warnings

from torch.utils import collect_env as _torch_collect_env

try:
    import torch
    TORCH_AVAILABLE = True
except (ImportError, NameError, AttributeError, OSError):
    torch = None
    TORCH_AVAILABLE = False

try:
    import torch_npu
    TORCH_NPU_AVAILABLE = True
except (ImportError, NameError, AttributeError, OSError):
    torch_npu = None
    TORCH_NPU_AVAILABLE = False

# No __all__, as real torch_npu's: every public name here is this module's own.

SystemEnv = collections.namedtuple("SystemEnv", [
    "torch_version", "torch_npu_version", "is_debug_build", "gcc_version", "clang_version", "cmake_version",
    "os", "libc_version", "python_version", "python_platform", "pip_version", "pip_packages",
    "conda_packages", "caching_allocator_config", "is_xnnpack_available", "cpu_info", "cann_version",
])

_NOT_KNOWN = "not known"


def get_torch_npu_install_path():
    """The first site-packages folder ("" when there is none)."""
    folders = site.getsitepackages()
    return folders[0] if folders else ""


def check_directory_path_readable(path):
    """RuntimeError unless `path` exists, is no symbolic link and is readable."""
    if not os.path.exists(path):
        raise RuntimeError(f"The path does not exist: {path}")
    if os.path.islink(path):
        raise RuntimeError(f"Invalid path is a soft chain (symbolic link): {path}")
    if not os.access(path, os.R_OK):
        raise RuntimeError(f"The path permission check failed: {path}")


def check_path_owner_consistent(path):
    """Deprecated in real torch_npu: only checks that `path` exists."""
    warnings.warn("`torch_npu.utils.collect_env.check_path_owner_consistent(path)` is deprecated and no longer "
                  "performs path owner verification. Please use `check_directory_path_readable(path)` to check "
                  "whether the path exists.", FutureWarning, stacklevel=2)
    if not os.path.exists(path):
        raise RuntimeError(f"The path does not exist: {path}")


def _cann_home():
    # Unset (or empty): the folder torch_npu points ASCEND_HOME_PATH at by default.
    from torch_npu._client_names import _CANN_FOLDER
    return os.environ.get("ASCEND_HOME_PATH", "") or _CANN_FOLDER


def get_cann_version():
    """The version line of the first ``ascend_*_install.info`` under the CANN
    folder (ASCEND_HOME_PATH, else vNPU's stand-in); "not known" without one."""
    home = os.path.realpath(_cann_home())
    if not os.path.isdir(home):
        return _NOT_KNOWN
    for folder, _, files in sorted(os.walk(home)):
        infos = sorted(f for f in files if re.fullmatch(r"ascend_.*_install\.info", f))
        if not infos:
            continue
        with open(os.path.join(folder, infos[0])) as f:
            for line in f:
                if "version" in line:
                    return line.strip().split("=")[-1]
    return _NOT_KNOWN


def get_torch_npu_version():
    return torch_npu.__version__ if TORCH_NPU_AVAILABLE and torch_npu is not None else "N/A"


def _optional(name, *args):
    # Some of torch's collectors are newer than others.
    collect = getattr(_torch_collect_env, name, None)
    return collect(*args) if collect is not None else _NOT_KNOWN


def get_env_info():
    run = _torch_collect_env.run
    pip_version, pip_packages = _torch_collect_env.get_pip_packages(run)
    if TORCH_AVAILABLE and torch is not None:
        torch_version, debug = torch.__version__, str(torch.version.debug)
    else:
        torch_version = debug = "N/A"
    return SystemEnv(
        torch_version=torch_version,
        torch_npu_version=get_torch_npu_version(),
        is_debug_build=debug,
        gcc_version=_torch_collect_env.get_gcc_version(run),
        clang_version=_torch_collect_env.get_clang_version(run),
        cmake_version=_torch_collect_env.get_cmake_version(run),
        os=_torch_collect_env.get_os(run),
        libc_version=_torch_collect_env.get_libc_version(),
        python_version=f"{sys.version.replace(chr(10), ' ')} ({sys.maxsize.bit_length() + 1}-bit runtime)",
        python_platform=_torch_collect_env.get_python_platform(),
        pip_version=pip_version,
        pip_packages=pip_packages,
        conda_packages=_torch_collect_env.get_conda_packages(run),
        caching_allocator_config=_torch_collect_env.get_cachingallocator_config(),
        is_xnnpack_available=_optional("is_xnnpack_available"),
        cpu_info=_optional("get_cpu_info", run),
        cann_version=get_cann_version(),
    )


_REPORT = """PyTorch version: {torch_version}
Torch-npu version: {torch_npu_version}
Is debug build: {is_debug_build}

OS: {os}
GCC version: {gcc_version}
Clang version: {clang_version}
CMake version: {cmake_version}
Libc version: {libc_version}

Python version: {python_version}
Python platform: {python_platform}

Is XNNPACK available: {is_xnnpack_available}

CPU:
{cpu_info}

CANN:
{cann_version}

Versions of relevant libraries:
{pip_packages}
{conda_packages}"""


def pretty_str(env_info):
    """The report of a SystemEnv: None reads "Could not collect", booleans
    Yes/No, empty package lists "No relevant packages", package lines are
    tagged with their installer."""
    fields = env_info._asdict()
    for key, value in fields.items():
        if value is None:
            fields[key] = "Could not collect"
        elif value is True or value is False:
            fields[key] = "Yes" if value else "No"
    for key, tag in (("pip_packages", f"[{env_info.pip_version}] "), ("conda_packages", "[conda] ")):
        text = fields[key]
        if text == "":
            text = "No relevant packages"
        fields[key] = "\n".join(tag + line for line in text.split("\n"))
    fields["cpu_info"] = env_info.cpu_info
    return _REPORT.format(**fields)


def get_npu_env_lines():
    """The virtual devices this process sees (vNPU's addition to the report)."""
    lines = [f"torch_npu version: {torch_npu.__version__} (vNPU, an emulator)",
             f"CANN version: {torch.version.cann}",
             f"NPU count: {torch.npu.device_count()}"]
    if torch.npu.device_count():
        lines.append(f"NPU 0: {torch.npu.get_device_name(0)} (SoC version {torch_npu.npu.get_soc_version()})")
    return lines


def get_pretty_env_info():
    return pretty_str(get_env_info()) + "\n\n" + "\n".join(get_npu_env_lines()) + "\n"


def main():
    print("Collecting environment information...")
    print(get_pretty_env_info())


if __name__ == "__main__":
    main()
