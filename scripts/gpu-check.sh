#!/usr/bin/env bash
# The GPU paths for real, on a bare GPU node, in a few minutes: scripts/gpu_check.py does the work and
# writes its evidence to OUT/gpu-check.json and OUT/gpu-check.md (OUT defaults to reports/gpu-check).
#
#   scripts/gpu-check.sh [OUT]       run the check; every step that needs no torch runs without it
#   scripts/gpu-check.sh --carry     print what to copy onto the GPU node (paths, sizes) and the call
#
# Needs a Python >= 3.11 (GPU_CHECK_CHECK_PYTHON, else the first of python3.13, python3.12, python3.11,
# python3 that is one) and nothing else installed: nvidia-ml-py comes from the carried wheel when that
# Python lacks it; torch (GPU_CHECK_PYTHON: an interpreter that has it) only for the P2P probe and the
# NCCL sweep, which are skipped with the reason otherwise. GPU_CHECK_DEADLINE_S bounds the whole run.
# Exit status: 0 every step that ran passed; 1 a step failed or a comparison differs; 2 the check could
# not start; 3 no NVIDIA GPU here, so nothing on a GPU was checked.
set -euo pipefail
# Every step names GPUs by their NVML index, which is PCI order; CUDA counts fastest first unless told otherwise.
export CUDA_DEVICE_ORDER=PCI_BUS_ID
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONDONTWRITEBYTECODE=1   # nothing is left in the checkout

python="${GPU_CHECK_CHECK_PYTHON:-}"
if [[ -z "$python" ]]; then
  for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 \
        && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      python="$(command -v "$candidate")"; break
    fi
  done
fi
if [[ -z "$python" ]]; then
  echo "gpu-check: expected a Python >= 3.11 (python3.13, python3.12, python3.11 or python3; or set" \
       "GPU_CHECK_CHECK_PYTHON); found none that runs" >&2
  exit 2
fi

if [[ "${1:-}" == "--carry" ]]; then
  exec "$python" scripts/gpu_check.py --carry
fi
out="${1:-reports/gpu-check}"
if [[ "$out" == -* ]]; then
  echo "gpu-check: expected OUT (a folder) or --carry; got $out" >&2
  exit 2
fi
deadline="${GPU_CHECK_DEADLINE_S:-470}"
timeout --kill-after=10 "$deadline" "$python" scripts/gpu_check.py --out "$out"
