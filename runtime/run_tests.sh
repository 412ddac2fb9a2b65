#!/usr/bin/env bash
# Builds the vNPU runtime and runs its unit tests, plain and under
# ThreadSanitizer and AddressSanitizer, each in its own build directory:
#   build/runtime-plain, build/runtime-tsan, build/runtime-asan (repo root).
#
# Usage: runtime/run_tests.sh [plain|tsan|asan|all]   (default: all)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "${here}/.." && pwd)"
what="${1:-all}"

case "${what}" in
  plain) variants=(plain) ;;
  tsan) variants=(tsan) ;;
  asan) variants=(asan) ;;
  all) variants=(plain tsan asan) ;;
  *)
    echo "usage: $0 [plain|tsan|asan|all]" >&2
    exit 2
    ;;
esac

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
launcher=()
# CCACHE_BASEDIR: paths under the checkout are relative in ccache's key, so
# another clone of the repository (CI's) reuses these objects; NOHASHDIR:
# these builds have debug info, for which ccache would otherwise key on the
# working directory too (the reused objects' debug info then names the first
# clone's paths, which tests do not mind).
if command -v ccache >/dev/null 2>&1; then
  launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_BASEDIR=${repo_root};CCACHE_NOHASHDIR=1;ccache")
fi
jobs="$(nproc 2>/dev/null || echo 2)"

run_variant() {
  local variant="$1" sanitizer="" wrapper=()
  case "${variant}" in
    plain) sanitizer="" ;;
    tsan)
      sanitizer="thread"
      export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}"
      # TSan in GCC 12 cannot cope with the high mmap randomisation of newer
      # kernels ("unexpected memory mapping"); run without ASLR when we can.
      if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
        wrapper=(setarch "$(uname -m)" -R)
      fi
      ;;
    asan)
      sanitizer="address"
      export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1}"
      ;;
  esac

  local build_dir="${repo_root}/build/runtime-${variant}"
  echo "=== ${variant}: configuring ${build_dir}"
  cmake -S "${here}" -B "${build_dir}" "${generator[@]}" "${launcher[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVNPU_BUILD_TESTS=ON -DVNPU_SANITIZER="${sanitizer}" || return 1
  echo "=== ${variant}: building"
  # `|| return`: the caller runs this in an `if`, where set -e does not apply.
  cmake --build "${build_dir}" -j "${jobs}" || return 1
  echo "=== ${variant}: testing"
  # ctest itself runs under the wrapper so that test discovery (which starts
  # the test binary) gets the same environment as the tests.
  (cd "${build_dir}" && "${wrapper[@]}" ctest --output-on-failure -j "${jobs}")
}

failed=()
for variant in "${variants[@]}"; do
  if ! (run_variant "${variant}"); then failed+=("${variant}"); fi
done

if ((${#failed[@]} > 0)); then
  echo "FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "All runtime test variants passed: ${variants[*]}"
