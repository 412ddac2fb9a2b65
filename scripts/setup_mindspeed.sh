#!/usr/bin/env bash
# Sets up MindSpeed on Megatron-LM for vNPU, from source trees you point it at
# (nothing of either is vendored here; CI reaches only PyPI, so the tests
# that need this stack skip without it: tests/test_mindspeed.py).
#
#   scripts/setup_mindspeed.sh STACK_DIR MEGATRON_LM_TREE MINDSPEED_TREE
#
#   MEGATRON_LM_TREE  a checkout of NVIDIA/Megatron-LM at core_v0.12.1
#   MINDSPEED_TREE    a checkout of Ascend/MindSpeed (its master supports
#                     megatron core 0.12.1)
#
# STACK_DIR gets a venv (venv/, over this Python's site-packages, so it sees
# torch 2.13.0 and torch_npu) with MindSpeed's pins that matter here
# (numpy<=1.26.0, and pybind11 for Megatron's dataset helpers), and links
# Megatron-LM/ and MindSpeed/ to the trees. Then run the tests with
#   VNPU_MINDSPEED_STACK=STACK_DIR scripts/test.sh tests/test_mindspeed.py
# (docs/mindspeed.md).
set -euo pipefail
if [ $# -ne 3 ]; then
  sed -n '2,19p' "$0" >&2
  exit 2
fi
stack=$(mkdir -p "$1" && cd "$1" && pwd)
megatron=$(cd "$2" && pwd)
mindspeed=$(cd "$3" && pwd)
PYTHON=${PYTHON:-python3}

[ -f "$megatron/pretrain_gpt.py" ] && [ -d "$megatron/megatron/training" ] ||
  { echo "[setup_mindspeed] $megatron is not a Megatron-LM tree (no pretrain_gpt.py, megatron/training)" >&2; exit 1; }
[ -f "$mindspeed/mindspeed/megatron_adaptor.py" ] ||
  { echo "[setup_mindspeed] $mindspeed is not a MindSpeed tree (no mindspeed/megatron_adaptor.py)" >&2; exit 1; }
version=$(sed -n 's/^MINOR = \([0-9]*\).*/\1/p; s/^PATCH = \([0-9]*\).*/\1/p' \
          "$megatron/megatron/core/package_info.py" | paste -sd.)
[ "$version" = "12.1" ] ||
  echo "[setup_mindspeed] warning: Megatron-LM core is 0.$version, MindSpeed supports 0.12.1" >&2

ln -sfn "$megatron" "$stack/Megatron-LM"
ln -sfn "$mindspeed" "$stack/MindSpeed"
if [ ! -x "$stack/venv/bin/python" ]; then
  echo "[setup_mindspeed] venv in $stack/venv"
  "$PYTHON" -m venv --system-site-packages "$stack/venv"
fi
torch_pin=$("$stack/venv/bin/python" -c 'import torch; print("torch==" + torch.__version__)')
echo "$torch_pin" > "$stack/constraints.txt"
# MindSpeed's requirements that compile against numpy (the host's may be built
# for numpy 2, which the venv's 1.26 cannot load: pandas, scikit-learn, ...),
# and pytest-mock, which its unit tests use.
"$stack/venv/bin/python" -m pip install -q -c "$stack/constraints.txt" \
  "numpy==1.26.0" "pybind11==3.1.0" "sentencepiece==0.2.3" "pandas==2.2.3" "scikit-learn==1.5.2" \
  "SQLAlchemy==2.0.36" "gpytorch==1.13" "pytest-mock==3.14.0" 2>&1 | grep -v "dependency conflicts\|requires numpy\|resolver does not" || true
PYTHONPATH="$mindspeed:$megatron" "$stack/venv/bin/python" -c \
  'import torch, torch_npu, mindspeed.megatron_adaptor, megatron.training' >/dev/null 2>&1 ||
  { echo "[setup_mindspeed] the stack does not import: try PYTHONPATH=$mindspeed:$megatron $stack/venv/bin/python -c 'import mindspeed.megatron_adaptor'" >&2; exit 1; }
echo "[setup_mindspeed] ready: VNPU_MINDSPEED_STACK=$stack"
