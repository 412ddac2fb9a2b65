#!/usr/bin/env bash
# Installs whatever is missing to build and run vNPU, then builds it.
# Safe to re-run: each step is skipped when already done.
#   - Python packages: torch==2.13.0 (CPU build), numpy, and cmake and ninja
#     when the system has none; with --for-tests also pytest, expecttest and pytest-xdist
#   - Debian packages (when root): g++; with --for-tests also GoogleTest and
#     ccache (the runtime's tests build three variants)
#   - torch_npu._C (CMake + ninja, incremental) and an editable install of
#     the torch_npu distribution (so importlib.metadata finds it)
# The demo path installs only what running vNPU needs: on a fresh machine
# every package is time (docs/building.md has the figures).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
for_tests=0
[ "${1:-}" = "--for-tests" ] && for_tests=1

# Python packages first, in one pip call (each call costs seconds). cmake and
# ninja come from PyPI when the system lacks them: no root, no apt index.
scripts_dir=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
export PATH="$PATH:$scripts_dir"
need_pip=()
# torch must be exactly 2.13.0: a bare `torch` requirement would pull a
# multi-GB CUDA build.
"$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.__version__.split("+")[0] == "2.13.0" else 1)' 2>/dev/null ||
  need_pip+=(torch==2.13.0)
# yaml: the kernel generator reads ATen's native_functions.yaml with torchgen.
modules=(numpy yaml:pyyaml)
# pytest-xdist: scripts/test.sh runs the suite on two workers.
[ $for_tests = 1 ] && modules+=(pytest expecttest "xdist:pytest-xdist==3.8.0")
for entry in "${modules[@]}"; do
  module=${entry%%:*} package=${entry#*:}
  "$PYTHON" -c "import $module" 2>/dev/null || need_pip+=("$package")
done
command -v cmake >/dev/null || need_pip+=(cmake)
command -v ninja >/dev/null || need_pip+=(ninja)
if [ ${#need_pip[@]} -gt 0 ]; then
  echo "[setup] pip install ${need_pip[*]}"
  # --no-compile: byte-compiling all of torch's modules at install took 33 of
  # its 50 s on 2 cores; Python compiles the ones a program imports, once.
  "$PYTHON" -m pip install -q --no-compile "${need_pip[@]}"
fi

# Byte-compiled torch, once. pip's --no-compile above leaves it to Python to
# cache each module the first time a program imports it, but where
# PYTHONDONTWRITEBYTECODE is set (this project's CI machines set it) nothing
# is ever cached, and every process compiled torch's modules from source:
# `import torch` took 3.1 s instead of 1.5 s, in every rank, DataLoader worker
# and subprocess test. compileall on all cores takes a few seconds.
# Prints the folders of torch and torchgen (which `import torch` imports) whose
# bytecode is missing where Python will not cache it.
torch_to_compile=$("$PYTHON" -c '
import importlib.util, os, sys
for package in ("torch", "torchgen"):
    init = importlib.util.find_spec(package).origin
    if sys.dont_write_bytecode and not os.path.exists(importlib.util.cache_from_source(init)):
        print(os.path.dirname(init))')
if [ -n "$torch_to_compile" ]; then
  echo "[setup] byte-compiling torch (Python does not cache it here: PYTHONDONTWRITEBYTECODE)"
  # shellcheck disable=SC2086  # one folder per line
  "$PYTHON" -m compileall -q -j 0 $torch_to_compile >/dev/null || true
fi

need_apt=()
command -v g++ >/dev/null || need_apt+=(g++)
if [ $for_tests = 1 ]; then
  command -v ccache >/dev/null || need_apt+=(ccache)
  [ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "[setup] apt-get install ${need_apt[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "[setup] missing system packages: ${need_apt[*]} (install them, e.g. with sudo apt-get install)" >&2
    exit 1
  fi
fi

PYTHON="$PYTHON" ./scripts/build.sh >/tmp/vnpu-build.log 2>&1 || { cat /tmp/vnpu-build.log; exit 1; }
echo "[setup] built torch_npu._C"

# Installed, from this checkout (checked outside it, so that the checkout's
# own folder cannot answer for the installation), with this pyproject's
# entry points (torch.backends, torch_dynamo_backends)?
installed_here() {
  (cd / && "$PYTHON" - "$PWD_ROOT" <<'PY'
import importlib.metadata as m, os, sys
root = sys.argv[1]
try:
    dist = m.distribution("torch_npu")
except m.PackageNotFoundError:
    sys.exit(1)
import torch_npu
if os.path.dirname(torch_npu.__file__) != os.path.join(root, "torch_npu"):
    sys.exit(1)
sys.exit(0 if "npu" in m.entry_points(group="torch_dynamo_backends").names else 1)
PY
  ) 2>/dev/null
}
PWD_ROOT="$PWD"
# torch_npu's own modules too, for the same reason (a checkout's __pycache__
# is git-ignored; compileall skips what is up to date).
"$PYTHON" -c 'import sys; sys.exit(0 if sys.dont_write_bytecode else 1)' &&
  { "$PYTHON" -m compileall -q -j 0 torch_npu >/dev/null || true; }
if ! installed_here; then
  echo "[setup] pip install --no-build-isolation --no-deps -e ."
  # The extension is already built; the editable install only records the
  # distribution metadata and the torch.backends entry point.
  VNPU_SKIP_BUILD=1 "$PYTHON" -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | grep -v "Running pip as the 'root' user" || true
fi
