#!/usr/bin/env bash
# Create .venv with everything kbuild's builder, runtime and tests need (idempotent).
# torch 2.14.1 (CUDA 13.0 build) comes from the local wheel store or PyPI; nvcc is the system's.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install --quiet "torch==${KBUILD_TORCH:-2.14.1}" -e ".[test]" 2>&1 \
  | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import torch, kbuild, builder; print('kbuild env ready: torch', torch.__version__)"
