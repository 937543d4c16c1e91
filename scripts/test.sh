#!/usr/bin/env bash
# Builds (scripts/build.sh) and runs the tests: the CPU suite, then — where nvcc is present, as on
# CI's machine — the GPU compile check of both vendors (scripts/gpu/ci-compile.sh: the cuda and hip
# presets, their GPU tests, which skip saying so without a GPU, and the CUDA/HIP kernel-symbol
# comparison). No AMD GPU is available anywhere, so HIP is compile-checked only.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
if command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  scripts/gpu/ci-compile.sh
else
  echo "test: GPU compile check skipped (nvcc not found)"
fi
# Last, so the run closes on the suite that executes here.
ctest --preset cpu -j "$(nproc)"
