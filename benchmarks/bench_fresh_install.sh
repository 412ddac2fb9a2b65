#!/usr/bin/env bash
# Times ./scripts/demo.sh as on a fresh machine: a new virtual environment
# without torch or numpy, a PATH without cmake, ninja and ccache (setup.sh
# installs them from PyPI), ccache off, a fresh clone of this repository.
# Each output line is prefixed with the seconds since the start.
#
#   benchmarks/bench_fresh_install.sh [work-dir]     (default /tmp/vnpu-fresh; emptied first)
#
# Needs a base Python 3 with venv, g++ and git; PyPI (or its mirror) reachable.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-/tmp/vnpu-fresh}"
base_python="$(python3 -c 'import sys; print(sys.executable)')"
rm -rf "$work" && mkdir -p "$work/bin"
# A PATH like a fresh machine's: the system's tools without the build tools.
for d in /usr/local/bin /usr/bin /bin; do
  for f in "$d"/*; do
    b=$(basename "$f")
    case "$b" in cmake | ctest | cpack | ninja | ccache | python | python3 | pip | pip3) continue ;; esac
    [ -e "$work/bin/$b" ] || ln -s "$f" "$work/bin/$b"
  done
done
"$base_python" -m venv "$work/venv"
git clone -q "$repo" "$work/repo"
cd "$work/repo"
export PATH="$work/venv/bin:$work/bin" CCACHE_DISABLE=1
hash -r
start=$(date +%s.%N)
elapsed() { echo "$(date +%s.%N) - $start" | bc; }
./scripts/demo.sh 2>&1 | while IFS= read -r line; do printf '%6.1f %s\n' "$(elapsed)" "$line"; done
echo "total $(elapsed) s"
