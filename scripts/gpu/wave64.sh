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
targets=(test_gpu_runtime test_gemm_gpu test_gpu_ops test_attention_gpu test_paged_attention_gpu test_varlen_gpu test_rope_cache_gpu
         test_linear_gpu test_engine_gpu test_mfma_emulation test_sample_gpu)
start=$(date +%s)
cmake --preset hip-cpu -DFLASHPORT_HIP_CPU_DIR="$dir" >/dev/null
cmake --build build/hip-cpu --parallel "$JOBS" --target "${targets[@]}" >/dev/null
built=$(( $(date +%s) - start ))

# One process per test executable (not ctest's one per case: hundreds of process start-ups), two
# at a time. Left to the H200: the attention grid's full sweep (gtest_full on a GPU) and the attention
# family's bench-sized problems (*Problems*: b64_8k alone is half a billion cache elements), which
# the CPU would take hours to emulate; their small siblings run here through the grids.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
start=$(date +%s)
# Longest first (seconds on CI's 2 cores, 2026-12-05: varlen 563, attention 478, linear 198, paged 182,
# ops 178, sample 69, engine 63, the rest under 30), so that the two queues end together.
order=(test_varlen_gpu test_attention_gpu test_linear_gpu test_paged_attention_gpu test_gpu_ops test_sample_gpu test_engine_gpu
       test_rope_cache_gpu test_gemm_gpu test_gpu_runtime test_mfma_emulation)
((${#order[@]} == ${#targets[@]})) || { echo "wave64: the run order lists ${#order[@]} executables, the build ${#targets[@]}" >&2; exit 1; }
printf '%s\n' "${order[@]}" | xargs -P "$JOBS" -I{} sh -c \
  's=$(date +%s); build/hip-cpu/tests/gpu/{} --gtest_filter=-*FullGrid*:*Problems* >"$0/{}.log" 2>&1; echo $? >"$0/{}.rc";
   echo $(( $(date +%s) - s )) >"$0/{}.s"' "$logs"
ran=$(( $(date +%s) - start ))
status=0 passed=0 failed=0 skipped=0
for t in "${targets[@]}"; do
  log=$logs/$t.log
  p=$(grep -c '^\[       OK \]' "$log" || true) f=$(grep -c '^\[  FAILED  \] .*(' "$log" || true)
  s=$(grep -c '^\[  SKIPPED \] .*(' "$log" || true)
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  if [[ $(cat "$logs/$t.rc") != 0 ]]; then
    status=1
    echo "wave64: $t failed (exit $(cat "$logs/$t.rc")):"
    grep -E -B2 -A12 'Failure$|FAIL:|HIP-CPU:' "$log" | head -n 40 || tail -n 20 "$log"
  fi
done
echo "wave64: seconds per executable:$(for t in "${targets[@]}"; do printf ' %s %s' "${t#test_}" "$(cat "$logs/$t.s")"; done)"
echo "wave64: $passed passed, $failed failed, $skipped skipped (mma variants, graphs and timings, which this runtime lacks)"
echo "wave64: built in $built s, ran in $ran s ($JOBS jobs), runtime at $dir"
exit "$status"
