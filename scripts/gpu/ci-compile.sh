#!/usr/bin/env bash
# Compile check of the GPU backend for both vendors, for CI (no GPU needed):
#   1. installs Debian's hipcc (HIP 5.2) if missing;
#   2. configures and builds the `cuda` and `hip` presets' target gpu_check (the library, the CLI,
#      the GPU tests and bench drivers; the CPU suite is the cpu preset's), failing on any error or
#      warning (project code builds with -Werror);
#   3. runs the GPU tests of both builds, which must skip cleanly ("no GPU present"): each gtest
#      executable once, and ctest's other GPU-labelled tests;
#   4. compares the kernels defined in the device code of the CUDA and HIP objects
#      (tools/hip_symbols.py), so no port passes as an #ifdef stub;
#   5. prints the compile time of each preset.
# Usage: scripts/gpu/ci-compile.sh [--jobs N]
set -euo pipefail
cd "$(dirname "$0")/../.."
JOBS=$(nproc)
[[ "${1:-}" == "--jobs" ]] && JOBS=$2

export PATH="$PATH:/usr/local/cuda/bin"
command -v nvcc >/dev/null || { echo "ci-compile: nvcc not found (expected /usr/local/cuda/bin/nvcc)" >&2; exit 1; }
if ! command -v hipcc >/dev/null || [[ ! -e /usr/include/hip/hip_runtime.h ]]; then
  echo "== installing Debian's hipcc (HIP 5.2)"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    hipcc libamdhip64-dev rocm-device-libs llvm-15 >/dev/null
fi

declare -A SECONDS_FOR FRESH
for preset in cuda hip; do
  echo "== configure + build preset $preset ($JOBS jobs)"
  start=$(date +%s)
  # A build directory left by scripts/build.sh makes this an incremental build; say so in the times.
  [[ -f "build/$preset/CMakeCache.txt" ]] && FRESH[$preset]=" (incremental)" || FRESH[$preset]=""
  log=$(mktemp)
  cmake --preset "$preset" >"$log" 2>&1 || { cat "$log"; exit 1; }
  cmake --build --preset "$preset" --parallel "$JOBS" --target gpu_check >"$log" 2>&1 || { tail -n 60 "$log"; exit 1; }
  tail -n 2 "$log"
  SECONDS_FOR[$preset]=$(( $(date +%s) - start ))
  # One process per gtest executable: ctest's one process per case is ~2200 start-ups a preset (about
  # 6 minutes here) to print "skipped". Then ctest's other GPU tests (names without gtest's dot).
  echo "== GPU tests of preset $preset, one process per executable (they skip without a GPU)"
  passed=0 skipped=0
  for exe in $(find "build/$preset/tests/gpu" -maxdepth 1 -type f -executable -name 'test_*' | sort); do
    "$exe" >"$log" 2>&1 || { echo "ci-compile: $exe failed:"; tail -n 40 "$log"; exit 1; }
    passed=$((passed + $(grep -c '^\[       OK \]' "$log"))) skipped=$((skipped + $(grep -c '^\[  SKIPPED \] .*(' "$log")))
  done
  ctest --test-dir "build/$preset" -L '^gpu$' -E '[.]' --output-on-failure -j "$JOBS" >"$log" 2>&1 || { tail -n 40 "$log"; exit 1; }
  echo "   gtest: $passed passed, $skipped skipped; ctest's others: $(grep -E 'tests passed|tests failed' "$log")"
  echo "   a skipped test says why, e.g.:"
  "build/$preset/tests/gpu/test_gpu_runtime" --gtest_filter='*DescribesDevices' 2>&1 | grep -m1 -A1 "SKIPPED\|no GPU" || true
  rm -f "$log"
done

echo "== kernel symbols: CUDA vs HIP device code"
python3 tools/hip_symbols.py \
  --cuda build/cuda/src/CMakeFiles/flashport.dir/backends/gpu/*.cu.o \
  --hip build/hip/src/backends/gpu/hip/*.o

echo "== compile times (configure + build, $JOBS jobs): cuda ${SECONDS_FOR[cuda]} s${FRESH[cuda]}, hip ${SECONDS_FOR[hip]} s${FRESH[hip]}"
if (( SECONDS_FOR[cuda] > 600 )); then
  echo "ci-compile: the cuda preset took ${SECONDS_FOR[cuda]} s, over the 10-minute budget" >&2
  exit 1
fi
