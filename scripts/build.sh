#!/usr/bin/env bash
# Builds torch_npu._C in place (build/ holds the CMake tree; ninja + ccache
# keep rebuilds incremental). Uses the python on PATH and its torch.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
prefix=$(TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PYTHON" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
launcher=()
# ccache caches TUs built with a precompiled header only when told that the
# header's macros and __TIME__ may differ (ccache's "Precompiled headers").
# CCACHE_BASEDIR makes paths under this checkout relative in the cache key, so
# a second clone (CI's, a worktree) reuses what this one compiled.
command -v ccache >/dev/null &&
  launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_SLOPPINESS=pch_defines,time_macros;CCACHE_BASEDIR=$PWD;ccache")
# Reconfigure when what the configuration was made from changes: the
# python, its torch, ccache's presence or the arguments given here.
inputs="$(command -v "$PYTHON") $prefix $(TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PYTHON" -c 'import torch; print(torch.__version__)') ${launcher[*]} $*"
if [ ! -f build/build.ninja ] || [ "$(cat build/.vnpu-configure-inputs 2>/dev/null)" != "$inputs" ]; then
  rm -f build/CMakeCache.txt  # a fresh configuration, not one mixed with the old cache
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DPython3_EXECUTABLE="$(command -v "$PYTHON")" "${launcher[@]}" "$@"
  echo "$inputs" > build/.vnpu-configure-inputs
fi
cmake --build build -j "${VNPU_BUILD_JOBS:-$(nproc)}"
