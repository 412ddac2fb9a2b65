#!/usr/bin/env bash
# Sets up whatever is missing, then runs every test: the runtime's C++ tests
# (plain, ThreadSanitizer, AddressSanitizer) through ctest, then the Python
# suite with pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
echo "== runtime C++ tests (ctest: plain, tsan, asan) =="
./runtime/run_tests.sh all
echo "== Python tests (pytest) =="
exec "${PYTHON:-python3}" -m pytest tests -q -p no:cacheprovider "$@"
