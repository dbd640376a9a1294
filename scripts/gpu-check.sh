#!/usr/bin/env bash
# The GPU paths for real, on a machine with a GPU, in under 8 minutes: scripts/gpu_check.py does
# the work (live audit with NVML and nvidia-smi, NVML vs nvidia-smi, P2P probe, torch-NCCL sweep,
# tests/cuda_ext built for this GPU and run) and writes every result to OUT/gpu-check.json.
#
#   scripts/gpu-check.sh [OUT]          OUT defaults to reports/gpu-check
#
# GPU_CHECK_PYTHON: the interpreter with torch (default: the first of python3, python that imports
# torch). nvidia-ml-py, when that interpreter lacks it, is installed from a wheel in .cache/wheels
# (`pip download --no-deps -d .cache/wheels nvidia-ml-py` beforehand, for a machine with no
# package index) into a temporary folder; nothing is installed into the interpreter itself.
set -euo pipefail
# Every step names GPUs by their NVML index, which is PCI order; CUDA counts fastest first unless told otherwise.
export CUDA_DEVICE_ORDER=PCI_BUS_ID
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-reports/gpu-check}"
deadline="${GPU_CHECK_DEADLINE_S:-470}"

python="${GPU_CHECK_PYTHON:-}"
if [[ -z "$python" ]]; then
  for candidate in python3 python; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import torch' 2>/dev/null; then
      python="$(command -v "$candidate")"; break
    fi
  done
fi
if [[ -z "$python" ]]; then
  echo "gpu-check: expected a Python that imports torch (set GPU_CHECK_PYTHON); found none on PATH" >&2
  exit 2
fi

extra=""
if ! "$python" -c 'import pynvml' 2>/dev/null; then
  wheel="$(ls .cache/wheels/nvidia_ml_py-*.whl 2>/dev/null | tail -n 1 || true)"
  if [[ -n "$wheel" ]]; then
    extra="$(mktemp -d)"
    trap 'rm -rf "$extra"' EXIT
    "$python" -m pip install --quiet --no-deps --no-index --target "$extra" "$wheel"
  else
    echo "gpu-check: $python has no pynvml and .cache/wheels holds no nvidia-ml-py wheel: the audit falls back" \
         "to nvidia-smi" >&2
  fi
fi

mkdir -p "$out"
PYTHONPATH="${extra}${PYTHONPATH:+:$PYTHONPATH}" timeout --kill-after=10 "$deadline" \
  "$python" scripts/gpu_check.py --out "$out" --python "$python"
