#!/usr/bin/env bash
# Builds (scripts/build.sh) and runs the tests: the CPU suite, then the GPU-labelled tests of the
# CUDA build (they skip, saying so, where no GPU is present), then the HIP compile check when nvcc
# is present (CI's machine), since no AMD GPU is available to run it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --preset cpu -j "$(nproc)"
if [[ -d build/cuda ]]; then
  ctest --test-dir build/cuda -L gpu --output-on-failure
fi
if [[ -d build/cuda && -x scripts/gpu/ci-compile.sh ]]; then
  scripts/gpu/ci-compile.sh --hip-only
fi
