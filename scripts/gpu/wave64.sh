#!/usr/bin/env bash
# The portable GPU kernels executed with 64-wide wavefronts, on the CPU: the `hip-cpu` preset builds
# the GPU backend against ROCm's HIP CPU Runtime (warpSize 64, the width of GCN/CDNA chips such as
# the MI50..MI300) and runs the GPU test suite's portable cases against the same float64 references
# as on a GPU. No AMD GPU is needed, or available: this checks the wave64 logic, not speed.
#
# The runtime is not part of flashport. It is looked for at $FLASHPORT_HIP_CPU_DIR, else at
# ../shared/third_party/hip-cpu next to the checkout; where it is absent, or TBB is missing, the step
# is skipped and says why (exit 0).
# Usage: scripts/gpu/wave64.sh [--jobs N]
set -euo pipefail
cd "$(dirname "$0")/../.."
JOBS=$(nproc)
[[ "${1:-}" == "--jobs" ]] && JOBS=$2

dir=${FLASHPORT_HIP_CPU_DIR:-$(cd .. && pwd)/shared/third_party/hip-cpu}
if [[ ! -f "$dir/include/hip/hip_runtime.h" ]]; then
  echo "wave64: skipped: ROCm's HIP CPU Runtime is not at $dir (set FLASHPORT_HIP_CPU_DIR to run the kernels at wave64)"
  exit 0
fi
if [[ ! -f /usr/include/tbb/tbb.h && ! -f /usr/include/oneapi/tbb.h ]]; then
  echo "wave64: skipped: the HIP CPU Runtime needs TBB (Debian: libtbb-dev; scripts/install-deps.sh installs it)"
  exit 0
fi

# The GPU tests only: the CPU suite is the cpu preset's.
targets=(test_gpu_runtime test_gpu_ops test_attention_gpu test_paged_decode test_varlen_gpu test_rope_cache_gpu
         test_linear_gpu test_engine_gpu)
start=$(date +%s)
cmake --preset hip-cpu -DFLASHPORT_HIP_CPU_DIR="$dir" >/dev/null
cmake --build build/hip-cpu --parallel "$JOBS" --target "${targets[@]}" >/dev/null
built=$(( $(date +%s) - start ))

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
status=0
ctest --test-dir build/hip-cpu -L '^gpu$' -j "$JOBS" --output-on-failure >"$log" 2>&1 || status=$?
ran=$(( $(date +%s) - start ))
if (( status != 0 )); then tail -n 60 "$log"; fi
summary=$(grep -E "tests passed|tests failed" "$log" || true)
skipped=$(grep -c '(Skipped)' "$log" || true)
echo "wave64: ${summary:-no summary} (${skipped} skipped: mma variants, graphs and timings, which this runtime lacks)"
echo "wave64: built in $built s, ran in $ran s ($JOBS jobs), runtime at $dir"
exit "$status"
