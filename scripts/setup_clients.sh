#!/usr/bin/env bash
# Installs the pinned client libraries of tests/clients (transformers,
# accelerate, peft, diffusers, trl) if any is missing or at another version,
# with torch pinned by a constraint so pip never replaces it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
requirements=tests/clients/requirements.txt
if "$PYTHON" - "$requirements" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
wanted = [line.split("==") for line in open(sys.argv[1]) if "==" in line and not line.startswith("#")]
try:
    ok = all(version(name) == pin.strip() for name, pin in wanted)
except PackageNotFoundError:
    ok = False
sys.exit(0 if ok else 1)
PY
then
  exit 0
fi
constraint="$(mktemp)"
trap 'rm -f "$constraint"' EXIT
echo "torch==$("$PYTHON" -c 'import torch; print(torch.__version__.split("+")[0])')" > "$constraint"
echo "== installing the client libraries (tests/clients/requirements.txt) =="
"$PYTHON" -m pip install --quiet -c "$constraint" -r "$requirements"
