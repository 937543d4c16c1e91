#!/usr/bin/env bash
# Builds flashport. By default only what README command 1 runs: the `flashport` CLI and its
# libraries, from the `cpu` preset, and from the GPU preset too where a GPU driver is present
# (NVIDIA: /dev/nvidia0 or a working nvidia-smi, built with nvcc as `cuda`; AMD: /dev/kfd, built
# with hipcc as `hip`). It says which, and why, either way.
#   --all   every target of those presets: tests and benchmark drivers too; and the cuda preset
#           wherever nvcc is, GPU or not, as a compile check (scripts/test.sh, CI).
# The CI compile check of both GPU vendors without a GPU is scripts/gpu/ci-compile.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
targets=(--target flashport_cli)
what="the flashport CLI"
if [[ "${1:-}" == "--all" ]]; then
  targets=()
  what="everything (tests included)"
elif [[ -n "${1:-}" ]]; then
  echo "usage: scripts/build.sh [--all]" >&2
  exit 2
fi

# Sets `took` (seconds).
build_preset() {
  local start
  start=$(date +%s)
  cmake --preset "$1" >/dev/null
  cmake --build --preset "$1" -j "$jobs" "${targets[@]}"
  took=$(( $(date +%s) - start ))
  echo "build: $1 preset: $what built in $took s"
}

build_preset cpu

if [[ -z "${CUDACXX:-}" ]] && ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
has_nvcc() { [[ -n "${CUDACXX:-}" ]] || command -v nvcc >/dev/null; }
gpu=""
if [[ -e /dev/nvidia0 ]] || { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }; then
  if has_nvcc; then
    gpu=cuda
  else
    echo "build: an NVIDIA GPU driver is present but nvcc is not (install the CUDA toolkit):" \
      "the CUDA build was skipped; flashport runs on the CPU"
  fi
elif [[ -e /dev/kfd ]]; then
  if command -v hipcc >/dev/null; then
    gpu=hip
  else
    echo "build: an AMD GPU driver (/dev/kfd) is present but hipcc is not (scripts/install-deps.sh --hip):" \
      "the HIP build was skipped; flashport runs on the CPU"
  fi
else
  echo "build: no GPU driver found (no /dev/nvidia0, no working nvidia-smi, no /dev/kfd):" \
    "the GPU build was skipped; flashport runs on the CPU"
  # --all compiles CUDA anyway where nvcc is (CI's machine): the compile check needs no GPU.
  if [[ ${#targets[@]} == 0 ]] && has_nvcc; then
    gpu=cuda
    echo "build: --all: nvcc is here, so the cuda preset is compiled all the same, as a check"
  fi
fi
if [[ -n "$gpu" ]]; then
  build_preset "$gpu"
  # The project's budget for a whole CUDA build on a 2-core machine (shared/design.md).
  if [[ "$gpu" == cuda && ${#targets[@]} == 0 ]] && (( took > 600 )); then
    echo "build: warning: the cuda preset took $took s, over the 10-minute budget" >&2
  fi
fi
