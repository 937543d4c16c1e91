#!/usr/bin/env bash
# Builds flashport. By default only what README command 1 runs: the `flashport` CLI and its
# libraries, from the `cpu` preset, and from the GPU preset too where a GPU driver is present
# (NVIDIA: /dev/nvidia0 or a working nvidia-smi, built with nvcc as `cuda`; AMD: /dev/kfd, built
# with hipcc as `hip`). It says which, and why, either way.
#   --all   every target of those presets: tests and benchmark drivers too; and where nvcc is but no
#           GPU, the cuda preset's compile check (target gpu_check: the CLI, the GPU tests and bench
#           drivers; scripts/test.sh, CI). Where a Python can
#           import torch, the PyTorch extension too (the cpu tree is configured with preset `torch`).
#   --torch the CLI and the PyTorch extension (python/flashport/libflashport_torch*.so), so that
#           PYTHONPATH=python python3 -c "import flashport" works; with a GPU as above, the GPU preset
#           builds the CUDA/HIP extension when torch has that backend (python/csrc/CMakeLists.txt).
# The CI compile check of both GPU vendors without a GPU is scripts/gpu/ci-compile.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
targets=(--target flashport_cli)
what="the flashport CLI"
torch=()   # configure flags that add the PyTorch extension
has_torch() {
  local py
  for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null && "$py" -c "import torch" 2>/dev/null && return 0
  done
  return 1
}
if [[ "${1:-}" == "--all" ]]; then
  targets=()
  what="everything (tests included)"
  if has_torch; then
    torch=(-DFLASHPORT_TORCH=ON)
    what="everything (tests and the PyTorch extension included)"
  else
    echo "build: no Python here can import torch: the PyTorch extension is skipped (scripts/install-deps.sh)"
  fi
elif [[ "${1:-}" == "--torch" ]]; then
  has_torch || { echo "build: --torch: no Python here can import torch (python3, /usr/bin/python3)" >&2; exit 1; }
  targets=(--target flashport_cli --target flashport_torch)
  torch=(-DFLASHPORT_TORCH=ON)
  what="the flashport CLI and the PyTorch extension"
elif [[ -n "${1:-}" ]]; then
  echo "usage: scripts/build.sh [--all | --torch]" >&2
  exit 2
fi

# Whether the torch found by has_torch has the backend of GPU preset $1 (cuda, hip).
torch_has() {
  local py attr=cuda
  [[ "$1" == hip ]] && attr=hip
  for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null &&
      "$py" -c "import sys, torch; sys.exit(0 if getattr(torch.version, '$attr', None) else 1)" 2>/dev/null && return 0
  done
  return 1
}

# Sets `took` (seconds).
build_preset() {
  local start flags=() build_targets=("${targets[@]}")
  start=$(date +%s)
  # The extension goes into the cpu tree, and into a GPU tree only when torch has that GPU backend
  # (a CPU torch would only make the GPU tree rebuild position-independent for nothing).
  if [[ ${#torch[@]} -gt 0 ]] && { [[ "$1" == cpu ]] || torch_has "$1"; }; then
    flags=("${torch[@]}")
  elif [[ ${#torch[@]} -gt 0 && " ${targets[*]} " == *" flashport_torch "* ]]; then  # --torch
    echo "build: $1 preset: torch has no $1 backend, so no extension here; the cpu tree's serves CPU tensors"
    build_targets=(--target flashport_cli)
  fi
  cmake --preset "$1" "${flags[@]}" >/dev/null
  cmake --build --preset "$1" -j "$jobs" "${build_targets[@]}"
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
    # The CPU suite is the cpu tree's: here, the CLI, the GPU tests and bench drivers (CMakeLists.txt).
    targets=(--target gpu_check)
    what="the compile check (target gpu_check: the CLI, the GPU tests and bench drivers)"
    echo "build: --all: nvcc is here, so the cuda preset is compiled all the same, as a check"
  fi
fi
if [[ -n "$gpu" ]]; then
  build_preset "$gpu"
  # The project's budget for a whole CUDA build on a 2-core machine (shared/design.md).
  if [[ "$gpu" == cuda && "${targets[*]}" != "--target flashport_cli" ]] && (( took > 600 )); then
    echo "build: warning: the cuda preset took $took s, over the 10-minute budget" >&2
  fi
fi
