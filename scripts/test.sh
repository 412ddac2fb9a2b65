#!/usr/bin/env bash
# Sets up whatever is missing, then runs every test: the runtime's C++ tests
# (plain, ThreadSanitizer, AddressSanitizer) through ctest, then the Python
# suite with pytest, client libraries (tests/clients) included. This full run is what CI runs.
#
#   scripts/test.sh            everything
#   scripts/test.sh --quick    the edit loop: plain runtime tests only, and
#                              pytest without the tests marked `slow` (the
#                              OpInfo sweeps), stopping at the first failure
# Other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
variants=all
pytest_args=()
if [ "${1:-}" = "--quick" ]; then
  shift
  variants=plain
  pytest_args=(-m "not slow" -x)
fi
./scripts/setup.sh --for-tests
./scripts/setup_clients.sh  # tests/clients: transformers, accelerate, peft, diffusers, trl (pinned)
echo "== runtime C++ tests (ctest: ${variants}) =="
./runtime/run_tests.sh "${variants}"
echo "== Python tests (pytest) =="
# Two workers (pytest-xdist), one test file at a time each: most tests wait
# for subprocesses (torchrun jobs, builds) or the device's threads, so two
# overlap well on two cores; whole files keep module fixtures built once.
# Files go out in tests/conftest.py's order (longest first), not xdist's
# default of the most tests first.
exec "${PYTHON:-python3}" -m pytest tests -q -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder "${pytest_args[@]}" "$@"
