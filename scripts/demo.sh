#!/usr/bin/env bash
# Sets up whatever is missing, then trains the seeds' MLP on the virtual NPU
# and checks the loss curve against the same run on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec "${PYTHON:-python3}" examples/train_mlp.py
