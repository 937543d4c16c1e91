#!/usr/bin/env bash
# Builds the `cpu` preset, and the `cuda` preset too when nvcc is present (on PATH or in
# /usr/local/cuda). Says so when the CUDA build is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

cmake --preset cpu >/dev/null
cmake --build --preset cpu -j "$jobs"

if [[ -z "${CUDACXX:-}" ]] && ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
if [[ -f src/backends/gpu/CMakeLists.txt ]] && { [[ -n "${CUDACXX:-}" ]] || command -v nvcc >/dev/null; }; then
  start=$(date +%s)
  cmake --preset cuda >/dev/null
  cmake --build --preset cuda -j "$jobs"
  took=$(( $(date +%s) - start ))
  echo "build: cuda preset built in $took s"
  # The project's budget for a CUDA build on a 2-core machine (shared/design.md).
  if (( took > 600 )); then echo "build: warning: the cuda preset took $took s, over the 10-minute budget" >&2; fi
else
  echo "build: CUDA build skipped (nvcc not found); the cpu preset was built"
fi
