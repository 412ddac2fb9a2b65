"""``python -m torch_npu.utils.collect_env``: the environment report real
torch_npu prints (PyTorch's, with the torch_npu version and the CANN version),
followed by the virtual devices this process sees.

The module's names are real torch_npu's: ``SystemEnv`` (the report's fields),
``get_env_info()`` / ``pretty_str()`` / ``get_pretty_env_info()``, the path
checks, and ``TORCH_AVAILABLE`` / ``TORCH_NPU_AVAILABLE`` with the ``torch`` and
``torch_npu`` it imported (tests replace them to see the "N/A" answers).

Everything the report shares with PyTorch's (compilers, OS, Python, packages,
CPU) comes from torch.utils.collect_env.get_env_info itself; this module adds
the torch_npu and CANN versions and its own layout of the report.
"""

import collections
import os
import re
import site
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
_NOT_AVAILABLE = "N/A"


# ---------------------------------------------------------------------------------------------- the report

def get_env_info():
    # PyTorch's collector already finds the fields the two reports share; older torch versions lack a few
    # of them, which then read "not known".
    from_pytorch = _torch_collect_env.get_env_info()._asdict()
    fields = {name: from_pytorch.get(name, _NOT_KNOWN) for name in SystemEnv._fields}
    fields["torch_npu_version"] = get_torch_npu_version()
    fields["cann_version"] = get_cann_version()
    # Judged by this module's own import of torch (the one tests switch off), not PyTorch's.
    have_torch = TORCH_AVAILABLE and torch is not None
    fields["torch_version"] = torch.__version__ if have_torch else _NOT_AVAILABLE
    fields["is_debug_build"] = str(torch.version.debug) if have_torch else _NOT_AVAILABLE
    return SystemEnv(**fields)


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


def _as_text(value):
    """How a field reads in the report, as in PyTorch's: booleans Yes / No, a missing value "Could not collect"."""
    if value is None:
        return "Could not collect"
    if isinstance(value, bool):
        return "Yes" if value else "No"
    return value


def _package_lines(listing, installer):
    """Each line of a package listing, tagged with the installer that reported it."""
    listing = _as_text(listing) or "No relevant packages"
    return "\n".join(f"[{installer}] {line}" for line in listing.split("\n"))


def pretty_str(env_info):
    shown = {name: _as_text(value) for name, value in env_info._asdict().items()}
    shown["pip_packages"] = _package_lines(env_info.pip_packages, env_info.pip_version)
    shown["conda_packages"] = _package_lines(env_info.conda_packages, "conda")
    shown["cpu_info"] = env_info.cpu_info    # printed as collected, even when missing
    return _REPORT.format(**shown)


def get_npu_env_lines():
    """The virtual devices this process sees (vNPU's addition to the report)."""
    count = torch.npu.device_count()
    lines = [f"torch_npu version: {torch_npu.__version__} (vNPU, an emulator)",
             f"CANN version: {torch.version.cann}",
             f"NPU count: {count}"]
    if count > 0:
        lines.append(f"NPU 0: {torch.npu.get_device_name(0)} (SoC version {torch_npu.npu.get_soc_version()})")
    return lines


def get_pretty_env_info():
    npu_part = "\n".join(get_npu_env_lines())
    return f"{pretty_str(get_env_info())}\n\n{npu_part}\n"


def main():
    print("Collecting environment information...")
    print(get_pretty_env_info())


# ---------------------------------------------------------------------------------------------- versions

def get_torch_npu_version():
    if not TORCH_NPU_AVAILABLE or torch_npu is None:
        return _NOT_AVAILABLE
    return torch_npu.__version__


_INSTALL_INFO = re.compile(r"ascend_.*_install\.info")


def _install_info_files(home):
    """Per folder under ``home`` (walked in sorted order), the first ``ascend_*_install.info`` in it."""
    for folder, _, names in sorted(os.walk(home)):
        infos = sorted(name for name in names if _INSTALL_INFO.fullmatch(name))
        if infos:
            yield os.path.join(folder, infos[0])


def _version_field(info_path):
    """The value of the first line that names a version (``version=8.0.RC1``), or None."""
    with open(info_path) as info:
        for line in info:
            if "version" in line:
                return line.strip().split("=")[-1]
    return None


def get_cann_version():
    """The version in the CANN folder's install info (ASCEND_HOME_PATH, else vNPU's stand-in); "not known"
    when there is none."""
    from torch_npu._client_names import _CANN_FOLDER
    # An empty ASCEND_HOME_PATH counts as unset: torch_npu then looks in its default folder.
    home = os.path.realpath(os.environ.get("ASCEND_HOME_PATH") or _CANN_FOLDER)
    if os.path.isdir(home):
        for info_path in _install_info_files(home):
            version = _version_field(info_path)
            if version is not None:
                return version
    return _NOT_KNOWN


# ---------------------------------------------------------------------------------------------- paths

def get_torch_npu_install_path():
    """The first site-packages folder ("" when there is none)."""
    return next(iter(site.getsitepackages()), "")


def _refuse_missing(path):
    if not os.path.exists(path):
        raise RuntimeError(f"The path does not exist: {path}")


def check_directory_path_readable(path):
    """RuntimeError unless ``path`` exists, is no symbolic link and can be read."""
    _refuse_missing(path)
    if os.path.islink(path):
        raise RuntimeError(f"Invalid path is a soft chain (symbolic link): {path}")
    if not os.access(path, os.R_OK):
        raise RuntimeError(f"The path permission check failed: {path}")


def check_path_owner_consistent(path):
    """Deprecated in real torch_npu, which no longer compares owners: checks only that ``path`` exists."""
    warnings.warn("`torch_npu.utils.collect_env.check_path_owner_consistent(path)` is deprecated and no longer "
                  "performs path owner verification. Please use `check_directory_path_readable(path)` to check "
                  "whether the path exists.", FutureWarning, stacklevel=2)
    _refuse_missing(path)


if __name__ == "__main__":
    main()
