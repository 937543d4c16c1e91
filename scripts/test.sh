#!/usr/bin/env bash
# What CI runs (README command 2, after scripts/install-deps.sh), one step at a time. Each step prints
# its verdict and time, and a failing step does not hide the ones after it (a failed build ends the run):
#   build        everything: scripts/build.sh --all (the PyTorch extension too, where torch imports)
#   gpu-compile  where nvcc is present, as on CI's machine: the cuda and hip presets compiled, their
#                GPU tests (which skip without a GPU), the CUDA/HIP kernel-symbol comparison
#                (scripts/gpu/ci-compile.sh). No AMD GPU is available anywhere: HIP is compiled, and run at wave64 on the CPU.
#   fuzz         each libFuzzer target's seeds, then 10 s of fuzzing (scripts/fuzz.sh; tests/fuzz)
#   asan         the CPU tests under ASan + UBSan (scripts/asan.sh)
#   wave64       the portable GPU kernels run at a 64-wide wavefront on the CPU, through ROCm's HIP CPU
#                Runtime (scripts/gpu/wave64.sh; skipped, saying why, where ../shared/third_party/hip-cpu
#                is absent)
#   cpu-tests    the CPU suite (ctest --preset cpu), README command 1 in a fresh clone among them, and the
#                PyTorch package's pytest suite (tests/python/test_torch_*.py) where the extension was built
set -uo pipefail
cd "$(dirname "$0")/.."
summary=()
failed=0
step() {
  local name=$1 start rc=0
  shift
  echo "== test: $name: $*"
  start=$(date +%s)
  "$@" || rc=$?
  summary+=("$(printf "%-12s %5d s  %s" "$name" $(( $(date +%s) - start )) \
    "$( ((rc == 0)) && echo passed || echo "FAILED (exit $rc)")")")
  ((rc == 0)) || failed=1
  return "$rc"
}
print_summary() {
  echo "== test: summary"
  printf '   %s\n' "${summary[@]}"
}

step build scripts/build.sh --all || { print_summary; exit 1; }
if command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  step gpu-compile scripts/gpu/ci-compile.sh
else
  echo "== test: GPU compile check skipped (nvcc not found)"
fi
step fuzz bash -c 'scripts/install-deps.sh --fuzz && scripts/fuzz.sh --jobs "$(nproc)" all 10'
step asan scripts/asan.sh
step wave64 scripts/gpu/wave64.sh
step cpu-tests ctest --preset cpu -j "$(nproc)"
print_summary
exit "$failed"
