#!/usr/bin/env bash
# The H200 run, in stages that each fit one device call (<= 10 minutes). Every stage writes its logs
# under $OUT (the device tool fetches that folder) and builds first if the build is missing, so any
# stage works on a fresh machine.
#
#   h200.sh build     configure + build the `cuda` preset (sm_80/86/89/90 + PTX); resource report
#   h200.sh test      the GPU tests: label gpu (subsets, both flash variants, both GEMMs, the engine's
#                     other ops), the full
#                     flash grid (gpu_full) and paged decode (both split kernels), in parallel shards,
#                     against the float64 CPU reference
#   h200.sh sanitize [label...]  compute-sanitizer (memcheck, racecheck, synccheck, initcheck) over every
#                     GPU kernel on small cases (SANITIZE_CASES lists which tests reach which kernels)
#   h200.sh bench     bench/gpu/sdpa_peers.py: ours beside PyTorch SDPA (math, efficient, flash, cuDNN)
#   h200.sh decode-bench  bench/gpu/decode_peers.py: paged decode (both split kernels) vs SDPA
#                     cuDNN/flash/efficient and a copy
#   h200.sh ops-bench [args]  bench/gpu/ops_peers.py: every op's shared cases (linear, rms_norm, rope,
#                     swiglu, add, embedding, matmul, argmax, the cache writes, and the attention family's
#                     problems beside each SDPA backend) beside PyTorch's; arguments go to the script
#                     (e.g. --op linear --filter qwen7b, --op attention --dtype f16)
#   h200.sh decode    paged decode only: build its targets, its GPU tests, memcheck/racecheck on small
#                     cases, and the decode bench
#   h200.sh varlen    varlen attention and paged prefill (both flash variants) in parallel shards, then
#                     memcheck/racecheck on small cases
#   h200.sh varlen-split  varlen split-KV: its tests, memcheck/racecheck, and the varlen and dense q1/q4
#                     problems with split-KV and without (FLASHPORT_GPU_SPLIT_KV=0), same run
#   h200.sh tune [mma|wgmma]  bench/gpu/flash_tiles.cu (mma, the default) or flash_tiles_wgmma.cu: the flash
#                     kernel's tile/schedule candidates timed side by side on the issue's prefill problems
#                     (builds with FLASHPORT_TUNING; TUNE_MAX_HEAD_DIM=64 builds and runs only head dims <= 64)
#   h200.sh engine    bench/gpu/engine_peers.py: the GPU engine beside transformers bf16 (eager, sdpa) on
#                     a random Qwen2.5-7B-shaped folder it makes there: decode tok/s against the
#                     bandwidth limit, TTFT 512/4096, memory, batched decode (8, 32), top-1 agreement
#                     with fp32; engine.json + engine.md. Arguments go to the script (e.g. --quick)
#   h200.sh engine-test  the engine's GPU tests: ops vs the CPU, tiny fixtures vs transformers, CLI
#   h200.sh engine-profile  on engine's random 7B folder (made first if missing): decode kernel times
#                     per kernel name (ncu), and bench engine with the decode graph, without it, and
#                     with the BLAS GEMM instead of the GEMV, same run
#   h200.sh before-tree REV  (here, not on the device) REV's sources, for `compare`, into build/before-src:
#                     carry it with .deps
#   h200.sh compare WHAT  the figures of build/before-src beside this tree's, in one run, trees taking
#                     turns (a refactor's "unchanged within noise"): WHAT is build (both trees' CLI and
#                     bench drivers, sm_90), decode (decode_peers), attention (sdpa_peers) or engine
#                     (engine_peers, transformers eager only); results under $OUT/compare/{before,after}
#   h200.sh torch     the PyTorch package with CUDA, in one call: builds the extension against this
#                     python3's torch (FLASHPORT_TORCH_ONLY + FLASHPORT_CUDA, sm_90, build/h200-torch; with
#                     .deps carried, FLASHPORT_TORCH and flashport_bench_ops too, for the op-vs-C++ timing; if
#                     CMake's Torch config fails, a manual g++ link of python/csrc against the `flashport`
#                     library and torch's libraries), then pytest: test_torch_gpu.py (the op vs SDPA,
#                     torch.compile, CUDA graphs, streams, transformers Qwen2/Qwen3 bf16), the rest of
#                     tests/python/test_torch_*.py on cpu and cuda, bench/gpu/torch_peers.py (overhead, vs
#                     SDPA, memory, transformers 7B-shaped prefill) and `python3 -m flashport.bench sd` when
#                     python/flashport/bench.py exists. Each step runs even if one before it failed (a
#                     deadline keeps the whole under 10 minutes); everything is logged under $OUT/torch/ and
#                     summary.txt there says which step did what. .deps is optional here (used when carried)
#   h200.sh serve [args]  bench/gpu/serve_peers.py: `flashport serve` (HTTP, SSE) at 1, 8, 32 and 64
#                     concurrent streams against `bench engine` at the same batch on a random
#                     Qwen2.5-7B-shaped folder (made there, with the Qwen3 tokenizer of tests/data):
#                     aggregate decode tok/s, TTFT p50/p99; builds only the CLI (sm_90) on a fresh machine
#   h200.sh issue16-check  issue 16's closing run: build, the changed ops' GPU tests, engine_peers, A/B
#                     pairs of generate (decode merge fused / separate, greedy / sampled)
#   h200.sh prefill-ab  issue 16's prefill kernels, before (build/before-src, carried) against this
#                     tree in one run: GPU tests, ops bench rows, generate's TTFT 512/4096, bench engine;
#                     then the qkv GEMV's RoPE epilogue against FLASHPORT_QKV_ROPE=separate (decode)
#   h200.sh decode-ab  the decode merge on the op's own counters against the separate combine kernel:
#                     paged decode and engine GPU tests, generate pairs at 512 and 8192 prompt tokens,
#                     bench engine at batch 1-64, ncu per-kernel times of a decode step
#   h200.sh norm-ab   the GEMV's norm apart (the default) against the GEMV's prologue
#                     (FLASHPORT_GEMV_NORM=fused), this tree only: linear tests, generate 512/8192,
#                     bench engine 1/8, ncu decode, each way
#   h200.sh batch-gemv  the matrix-core GEMV (2-32 tokens): linear / matmul GPU tests and the batched
#                     perf rows, the split-KV attention tests, then bench engine at batch 1-64 with it
#                     (FLASHPORT_BATCH_GEMV=mma) and with AUTO's cuBLAS, turns taken, and ncu at batch 16
#   h200.sh batch-check  the projections' epilogues in the GEMM: the linear / matmul / engine GPU tests,
#                     sdpa_peers' split-KV problems, generate 512 + 256 now and as before (taking turns),
#                     bench engine at batch 1-64 now / bias staged / before, ncu at batch 16
#   h200.sh wgmma-check  the wgmma flash kernel: its tests (flash grid, varlen, plan), memcheck and
#                     racecheck on its sanitize row, issue 17's prefill problems beside SDPA (mma and wgmma)
#   h200.sh wgmma-auto  mma.sync against wgmma on the engine's prefill attention shape at 512-8192 tokens
#                     (where AUTO should pick wgmma) and one ncu profile of the wgmma kernel (bf16 d128 8k)
#   h200.sh wgmma-default  AUTO's wgmma at head dim 128: the attention, varlen and engine GPU tests, sharded
#   h200.sh tma-check  the wgmma kernel's TMA route (dense, varlen, paged): the wgmma attention tests
#                     (WgmmaTma: the route on) and varlen/paged-prefill tests, memcheck/racecheck on the
#                     wgmma rows, then issue 17's prefill problems beside SDPA with the route
#                     (FLASHPORT_GPU_WGMMA_TMA=1) and without
#   h200.sh attention-table  issue 17's closing table with the build's defaults: sdpa_peers (every problem),
#                     decode_peers, ncu on the wgmma kernel at d64/d256, its HGMMA count in the SASS
#   h200.sh ttft-4096  issue 16's TTFT at 4096 tokens with the defaults, transformers sdpa timed in the same call
#   h200.sh memory-check  the weights in one GPU buffer: engine tests, the driver's peaks of generate and bench engine
#   h200.sh decode-table  issue 16's decode figures: engine/ops tests, the copy rate, generate 512 + 256,
#                     bench engine at batch 1/8/32/64
#   h200.sh order-check  the causal tile order: the mma/wgmma/varlen grids, the engine's prefill shapes with
#                     the order over heads and head by head
#   h200.sh prefill-profile  the 4096-token prefill taken apart: transformers' and our kernels by family
#                     (torch.profiler / ncu at the card's clocks), ours warm and as a first request
#   h200.sh tool-goldens  the tool-calling chat goldens from transformers (make_chat_goldens.py --tools; no
#                     build, no GPU work) against the committed ones, which @huggingface/jinja made
#   h200.sh tma-engine  issue 16's TTFT at 4096 tokens on engine's random 7B folder: the paged prefill on
#                     wgmma with the TMA route, without it, and on mma.sync (FLASHPORT_GPU_FLASH=mma),
#                     taking turns in fresh processes
#   h200.sh tc-diag   ncu's throughput, occupancy and stall sections for the one-token GEMV and the
#                     matrix-core GEMV (8 and 16 tokens) on Qwen-7B's gate_up
#   h200.sh decode-trees  a decode change, build/before-src (carried) against this tree: both CLIs, the
#                     linear/ops/engine GPU tests, generate at 512 and 8192 prompt tokens with the trees
#                     taking turns, this tree's default against FLASHPORT_GEMV_NORM=fused,
#                     bench engine at batch 1-64 from each, ncu per-kernel decode times
#   h200.sh serve-check  tests/serve/test_serve_gpu.py: the server's GPU-sampled tokens against generate's
#   h200.sh engine-diagnose  on engine's random 7B folder: generate's driver-memory timeline (with and
#                     without the warm-up, weight check, 512-token steps) and ncu's per-kernel times of a
#                     512- and a 4096-token prefill
#   h200.sh portable [args]  the portable path's table (bench/gpu/portable_table.py): flash portable
#                     against naive (vendor and portable GEMM) and the default, the GEMM's FP32 rate, the
#                     7B-shaped engine default vs all-portable; a quick sm_90 build and the portable
#                     GEMM's tests first; PORTABLE_NCU=1 adds ncu profiles of the portable kernels
#   h200.sh memory-tools  issue 18 on the H200: `flashport doctor` (text, --json, --model on the
#                     random 7B folder), generate and bench engine with --memory-plot on that folder, a
#                     FLASHPORT_MEMTRACE log of generate summarised by `flashport memtrace`, and the
#                     doctor/memory tests of the GPU build; everything under $OUT/memory (back as memory.tgz)
#   h200.sh all       build, test, bench (sanitize separately: it is slow)
#
# The device machine has cmake, ninja, nvcc and PyTorch but none of Debian's -dev packages: run
# `scripts/gpu/h200.sh fetch-deps` here first (it downloads the .debs into .deps/, which git
# ignores), and pass carry [".deps"] to the device call. Example device command:
#   bash scripts/gpu/h200.sh build && bash scripts/gpu/h200.sh test
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
BUILD=$ROOT/build/h200  # the cuda preset, configured with Ninja in its own folder
JOBS=$(nproc)
# Nsight Compute: on PATH, or where the CUDA toolkit puts it.
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)

fetch_deps() {  # on the development machine: the .debs the build needs, for carrying to the device
  mkdir -p .deps
  (cd .deps && apt-get download libgtest-dev libgmock-dev googletest nlohmann-json3-dev libcli11-dev \
    libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libutf8proc-dev libutf8proc2 \
    libcpp-httplib-dev libcpp-httplib0.11 libbrotli-dev libbrotli1 libssl-dev zlib1g-dev)
}

use_deps() {  # on the device: unpack the carried .debs into /tmp/deps and point CMake at them
  local deps=/tmp/deps
  ls .deps/*.deb >/dev/null 2>&1 || { echo "h200.sh: no .deps/*.deb; run 'h200.sh fetch-deps' and carry .deps" >&2; exit 1; }
  for f in .deps/*.deb; do dpkg -x "$f" "$deps"; done  # every time: a warm machine may hold an older set
  find "$deps" -name '*.pc' -exec sed -i "s|prefix=/usr$|prefix=$deps/usr|" {} +
  export CMAKE_PREFIX_PATH=$deps/usr
  export PKG_CONFIG_PATH=$deps/usr/lib/x86_64-linux-gnu/pkgconfig:$deps/usr/share/pkgconfig
  export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PATH=$PATH:/usr/local/cuda/bin
}

build() {
  use_deps
  local t0=$(date +%s)
  # Ninja uses every core; the preset's Makefiles would too with --parallel.
  # Warnings stay warnings here (the device's host compiler may be newer than CI's, which enforces
  # -Werror); they are counted in build.log.
  # H200_ARCHS=90 builds sm_90 only, for quick iterations; the default is the preset's list.
  local archs=()
  [[ -n ${H200_ARCHS:-} ]] && archs=(-DCMAKE_CUDA_ARCHITECTURES="$H200_ARCHS")
  cmake --preset cuda -G Ninja -B "$BUILD" -DFLASHPORT_WERROR=OFF -DCMAKE_PREFIX_PATH="$CMAKE_PREFIX_PATH" "${archs[@]}" \
    2>&1 | tee "$OUT/build.log" | tail -n 3
  # Quick iterations (H200_ARCHS set) build only what the GPU stages run.
  # H200_TARGETS (space-separated) builds only those, e.g. the engine's for an engine-only call.
  local targets=()
  if [[ -n ${H200_TARGETS:-} ]]; then
    read -r -a targets <<<"$H200_TARGETS"
    targets=(--target "${targets[@]}")
  elif [[ -n ${H200_ARCHS:-} ]]; then
    targets=(--target test_attention_gpu test_gpu_runtime test_paged_attention_gpu test_varlen_gpu test_gpu_ops test_rope_cache_gpu
      test_linear_gpu test_engine_gpu test_gemm_gpu test_sample_gpu flashport_cli flashport_bench_paged_attention flashport_bench_ops
      flashport_bench_matmul)
  fi
  cmake --build "$BUILD" --parallel "$JOBS" "${targets[@]}" 2>&1 | tee -a "$OUT/build.log" | tail -n 5
  echo "build: $(( $(date +%s) - t0 )) s with $JOBS jobs, $(grep -c 'warning' "$OUT/build.log" || true) warning lines" |
    tee -a "$OUT/build.log"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 |
    tee -a "$OUT/build.log" || true
}

ensure_built() {
  [[ -n ${H200_TARGETS:-} ]] && { use_deps; return 0; }  # built by an explicit target list: trust it
  [[ -x $BUILD/tests/gpu/test_attention_gpu && -x $BUILD/tests/gpu/test_paged_attention_gpu &&
     -x $BUILD/tests/gpu/test_varlen_gpu && -x $BUILD/tests/gpu/test_gpu_ops &&
     -x $BUILD/tests/gpu/test_rope_cache_gpu && -x $BUILD/tests/gpu/test_linear_gpu &&
     -x $BUILD/tests/gpu/test_engine_gpu && -x $BUILD/tests/gpu/test_gemm_gpu && -x $BUILD/bin/flashport ]] ||
    build
  use_deps
}

# A stage's start: its folder $OUT/$1 (T), its start time (t0), and this tree built for sm_90 with the
# targets $2 (exported, so that later steps such as bench trust this build: ensure_built). The build's
# log lands in the folder; its time is echoed. The caller declares T and t0 local.
stage_start() {
  T=$OUT/$1
  mkdir -p "$T"
  t0=$(date +%s)
  export H200_ARCHS=${H200_ARCHS:-90} H200_TARGETS=$2
  build >"$T/build.log" 2>&1 || { tail -n 30 "$T/build.log"; return 1; }
  echo "build: $(( $(date +%s) - t0 )) s"
}

# "NAME tests: X passed, Y failed[, SUFFIX]" from a gtest log: $1 name, $2 log, $3 optional suffix.
tally() {
  echo "$1 tests: $(grep -c '^\[       OK \]' "$2") passed, $(grep -c '^\[  FAILED  \] .*(' "$2") failed${3:+, $3}"
}

# One test executable in parallel gtest shards: $1 the executable's name, $2 the log.
sharded() {
  local shards=8 pids=() status=0
  for ((i = 0; i < shards; ++i)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$BUILD/tests/gpu/$1" >"/tmp/$1_$i.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  cat /tmp/"$1"_*.log >"$2"
  return $status
}
decode_tests() { sharded test_paged_attention_gpu "$1"; }  # both split kernels
varlen_tests() { sharded test_varlen_gpu "$1"; }    # varlen + paged prefill, both flash variants

# Small cases of one GPU test executable under compute-sanitizer: $1 executable, $2 gtest filter,
# $3 tool, $4 log, $5 time limit in seconds.
sanitized() {
  local cs=compute-sanitizer
  command -v $cs >/dev/null || cs=/usr/local/cuda/bin/compute-sanitizer
  timeout "$5" $cs --tool "$3" --error-exitcode 1 --print-limit 20 "$BUILD/tests/gpu/$1" --gtest_filter="$2" >"$4" 2>&1
}

# sanitized under memcheck and racecheck, with a summary line each: $1 label, $2 executable, $3 gtest
# filter, $4 time limit in seconds, $5 log path prefix (default /tmp/sanitize_$1_; <tool>.log follows).
sanitized_both() {
  local status=0 tool log
  for tool in memcheck racecheck; do
    log=${5:-/tmp/sanitize_$1_}$tool.log
    sanitized "$2" "$3" $tool "$log" "$4" || status=1
    echo "== $1 $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)" \
         "$(grep -c '^\[       OK \]' "$log") tests ok"
  done
  return $status
}

# Small varlen / paged-prefill cases of both flash variants, for the sanitizers.
VARLEN_SANITIZE_FILTER='*VarlenGpu.*seqs7x7_97x97_1x1*:*PagedPrefillGpu*len97_q9_*:*BadOffsets*'

varlen() {
  ensure_built
  local t0=$(date +%s) status=0
  varlen_tests "$OUT/varlen_test.log" || status=1
  grep -h -B1 -A8 -E "Failure$|^  FAIL: " "$OUT/varlen_test.log" | head -n 60 || true
  tally varlen "$OUT/varlen_test.log" "$(( $(date +%s) - t0 )) s"
  sanitized_both varlen test_varlen_gpu "$VARLEN_SANITIZE_FILTER" 120 "$OUT/varlen_" || status=1
  return $status
}

# Small decode cases of both variants (Mma/Portable tests, /mma and /portable suites), for the sanitizers.
DECODE_SANITIZE_FILTER='*len7_q2*:*len97_q8*:*Bad*:*Workspace*'

test_stage() {
  ensure_built
  local t0=$(date +%s) status=0
  "$BUILD/tests/gpu/test_gpu_runtime" >"$OUT/test.log" 2>&1 || status=1
  # Subsets (label gpu) in one process, then the full flash grid in parallel shards.
  "$BUILD/tests/gpu/test_attention_gpu" --gtest_filter='-*FullGrid*' >>"$OUT/test.log" 2>&1 || status=1
  "$BUILD/tests/gpu/test_gpu_ops" >>"$OUT/test.log" 2>&1 || status=1  # the engine's other ops
  "$BUILD/tests/gpu/test_gemm_gpu" >>"$OUT/test.log" 2>&1 || status=1  # blas::gemm, every backend vs float64
  "$BUILD/tests/gpu/test_rope_cache_gpu" >>"$OUT/test.log" 2>&1 || status=1  # RoPE + cache write, fused
  "$BUILD/tests/gpu/test_linear_gpu" >>"$OUT/test.log" 2>&1 || status=1  # norm + product + residual / SwiGLU
  "$BUILD/tests/gpu/test_sample_gpu" >>"$OUT/test.log" 2>&1 || status=1  # sampling on the device vs the CPU op
  "$BUILD/tests/gpu/test_engine_gpu" >>"$OUT/test.log" 2>&1 || status=1  # the engine vs transformers
  local shards=12 pids=()
  # TEST_NO_FULL=1 leaves out the full flash grid (a quick check of changes outside the flash kernels).
  [[ -n ${TEST_NO_FULL:-} ]] && shards=0
  for ((i = 0; i < shards; ++i)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$BUILD/tests/gpu/test_attention_gpu" --gtest_filter='*FullGrid*' \
      >"/tmp/full_$i.log" 2>&1 & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  cat /tmp/full_*.log >"$OUT/test_full.log" 2>/dev/null || : >"$OUT/test_full.log"
  grep -h -E "^\[  (PASSED|FAILED)  \]|tests? ran" "$OUT/test_full.log" | sort | uniq -c | head -n 20 || true
  decode_tests "$OUT/decode_test.log" || status=1
  tally decode "$OUT/decode_test.log"
  varlen_tests "$OUT/varlen_test.log" || status=1
  tally varlen "$OUT/varlen_test.log"
  # The first failures in full: the harness's summary (case, errors, seed) or gtest's assertion text.
  grep -h -B1 -A7 -E "Failure$|^  FAIL: " "$OUT/test.log" "$OUT/test_full.log" "$OUT/decode_test.log" \
    "$OUT/varlen_test.log" | head -n 60 || true
  local logs=("$OUT/test.log" "$OUT/test_full.log" "$OUT/decode_test.log" "$OUT/varlen_test.log") passed failed skipped
  passed=$(cat "${logs[@]}" | awk '/^\[       OK \]/ {n++} END {print n+0}')
  skipped=$(cat "${logs[@]}" | awk '/^\[  SKIPPED \] .*\(/ {n++} END {print n+0}')
  failed=$(cat "${logs[@]}" | awk '/^\[  FAILED  \] .*\(/ {n++} END {print n+0}')
  echo "test: $(( $(date +%s) - t0 )) s"
  echo "gpu tests: $passed passed, $failed failed, $skipped skipped"
  return $status
}

# The sanitize stage's cases: every __global__ kernel of src/backends/gpu is named in some row's last
# field, and tests/python/test_sanitize_coverage.py fails CI when a kernel is added without one.
# Rows: label | test executable | gtest filter (small cases: the tools slow kernels ~100x) | kernels.
SANITIZE_CASES=(
  "flash|test_attention_gpu|*FlashSubset*q7_kv7*:*FlashSubset*q97_kv7*:*FlashNan*q1_kv300*|flash_fwd_portable_kernel flash_fwd_mma_kernel"
  "naive|test_attention_gpu|*NaiveSubset*q7_kv7*:*NaiveSubset*q97_kv7*:*NaiveSubset*_kv0_*|naive_masked_softmax_kernel naive_zero_rows_kernel gemm_portable_kernel"
  "varlen|test_varlen_gpu|$VARLEN_SANITIZE_FILTER|flash_fwd_portable_kernel flash_fwd_mma_kernel"
  "wgmma|test_attention_gpu|*FlashSubset.Wgmma*q7_kv7*:*FlashSubset.Wgmma*q97_kv7*:*FlashOddHeadDims.Wgmma*q7_kv65*|flash_fwd_wgmma_kernel"
  "wgmma_varlen|test_varlen_gpu|*VarlenGpu.Wgmma*seqs7x7_97x97_1x1*:*PagedPrefillGpu.Wgmma*len97_q9_*:*PagedPrefillTmaBlocks*d40_bs64*|flash_fwd_wgmma_kernel"
  "split_kv|test_attention_gpu|*FlashSplitKv*q1_kv256*:*FlashSplitKv*q7_kv301*|dense_blocks_kernel paged_attention_decode_split_mma_kernel paged_attention_decode_combine_kernel"
  "varlen_split_kv|test_varlen_gpu|*VarlenSplitKv.*seqs1x300_1x1_1x700*:*VarlenSplitKv.*seqs3x0_2x1200*:*VarlenSplitKvBadOffsets*|varlen_blocks_kernel paged_attention_decode_split_mma_kernel paged_attention_decode_split_portable_kernel paged_attention_decode_combine_kernel"
  "decode|test_paged_attention_gpu|$DECODE_SANITIZE_FILTER:*PagedCacheWrite*|paged_attention_decode_split_portable_kernel paged_attention_decode_split_mma_kernel paged_attention_decode_combine_kernel paged_cache_write_kernel"
  "ops|test_gpu_ops|*|rms_norm_kernel rope_kernel binary_kernel binary_halves_kernel embedding_kernel bias_round_kernel bias_rows_kernel linear_gemv_kernel argmax_kernel argmax_chunk_kernel argmax_merge_kernel gemm_portable_kernel"
  "rope_cache|test_rope_cache_gpu|*BadPositions*:*Captures*|rope_qk_cache_write_kernel"
  "sample|test_sample_gpu|*BadRows*:*MarkSeen*:*MultiBlock*|sample_kernel sample_chunk_kernel mark_seen_kernel"
  "linear|test_linear_gpu|-*Perf*|linear_gemv_kernel linear_gemv_mma_kernel rms_norm_kernel binary_kernel"
  # AllocationFailureThrows provokes an out-of-memory on purpose, which memcheck reports as an API error.
  "gemm|test_gemm_gpu|*|gemm_portable_kernel wgmma_probe_kernel wgmma_probe_mn_kernel"
  "runtime|test_gpu_runtime|-*AllocationFailure*|gemm_portable_kernel"
)
SANITIZE_TOOLS=${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}

# h200.sh sanitize [label ...]: every row of SANITIZE_CASES (or the named ones) under every tool of
# SANITIZE_TOOLS, a summary line each; `--list` prints the rows' kernels and exits.
sanitize() {
  if [[ ${1:-} == --list ]]; then
    printf '%s\n' "${SANITIZE_CASES[@]}" | cut -d'|' -f4 | tr ' ' '\n' | sort -u
    return 0
  fi
  ensure_built
  local status=0 row label exe filter kernels tool log
  : >"$OUT/sanitize.log"
  for row in "${SANITIZE_CASES[@]}"; do
    IFS='|' read -r label exe filter kernels <<<"$row"
    if (($#)) && [[ " $* " != *" $label "* ]]; then continue; fi
    for tool in $SANITIZE_TOOLS; do
      log=/tmp/sanitize_${label}_$tool.log
      # initcheck does not see the writes of cuBLAS's kernels, so a flashport kernel reading cuBLAS's
      # output is reported (matmul's bias epilogue, every time, with bit-exact results): under
      # initcheck the tests run the portable GEMM only (FLASHPORT_GPU_BLAS, gpu_test_util.h).
      local ok=0 vendor=""
      if [[ $tool == initcheck ]]; then
        FLASHPORT_GPU_BLAS=portable sanitized "$exe" "$filter" "$tool" "$log" 300 && ok=1
      else
        sanitized "$exe" "$filter" "$tool" "$log" 300 && ok=1
      fi
      # racecheck also reports hazards inside cuBLAS's own kernels (nvjet_*): not flashport's code.
      if ((!ok)) && [[ $tool == racecheck ]] && grep -q 'RACECHECK SUMMARY' "$log" &&
         ! grep -E 'Race reported between' "$log" | grep -v -q ' at nvjet_' &&
         ! grep -E '^=========     and ' "$log" | grep -v -q ' at nvjet_'; then
        ok=1 vendor=" (all in cuBLAS's nvjet kernels: not flashport's)"
      fi
      ((ok)) || status=1
      echo "== $label $tool ($kernels): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)$vendor" \
           "$(grep -c '^\[       OK \]' "$log") tests ok" | tee -a "$OUT/sanitize.log"
      # A tool's findings in full (the first 20, with the kernel and source line of each) for the record.
      grep -q -E 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' "$log" || grep -E '^=========' "$log" |
        head -n 400 >"$OUT/sanitize_${label}_$tool.log"
    done
  done
  return $status
}

bench() {
  ensure_built
  PYTHONUNBUFFERED=1 python3 bench/gpu/sdpa_peers.py --flashport "$BUILD/bin/flashport" --out "$OUT" "$@" 2>&1 |
    tee "$OUT/bench.log"
}

decode_bench() {
  ensure_built
  PYTHONUNBUFFERED=1 python3 bench/gpu/decode_peers.py --bench "$BUILD/bin/flashport_bench_paged_attention" \
    --cases "$BUILD/bin/flashport_bench_ops" --out "$OUT" 2>&1 | tee "$OUT/decode_bench.log"
}

ops_bench() {
  ensure_built
  cmake --build "$BUILD" --parallel "$JOBS" --target flashport_bench_ops >"$OUT/ops_build.log" 2>&1 ||
    { tail -n 40 "$OUT/ops_build.log"; return 1; }
  PYTHONUNBUFFERED=1 python3 bench/gpu/ops_peers.py --bench "$BUILD/bin/flashport_bench_ops" --out "$OUT" "$@" 2>&1 |
    tee "$OUT/ops_bench.log"
}

engine() {  # a few minutes: the 15 GB folder is written and read back from the page cache
  ensure_built
  local status=0
  # Incremental, as ensure_built only checks that binaries exist: a warm machine's may predate this tree.
  cmake --build "$BUILD" --parallel "$JOBS" --target flashport_cli test_cli >"$OUT/engine_build.log" 2>&1 ||
    { tail -n 40 "$OUT/engine_build.log"; return 1; }
  # The CLI's own GPU check first (seconds): generate's driver peak, bench engine on a tiny folder.
  "$BUILD/tests/model/test_cli" --gtest_filter='*Gpu*' >"$OUT/engine_cli_test.log" 2>&1 || status=1
  tally "engine CLI (GPU)" "$OUT/engine_cli_test.log"
  PYTHONUNBUFFERED=1 python3 bench/gpu/engine_peers.py --flashport "$BUILD/bin/flashport" --out "$OUT" "$@" 2>&1 |
    tee "$OUT/engine.log" || status=1
  return $status
}

# The engine's GPU tests on their own: its ops against the CPU kernels, the tiny fixtures against
# transformers' references (logits, greedy, batched decode, GPU vs CPU engine per position), and the
# CLI's GPU checks (generate's memory figures, bench engine).
engine_test() {
  ensure_built
  local status=0
  cmake --build "$BUILD" --parallel "$JOBS" --target test_cli >"$OUT/engine_test_build.log" 2>&1 ||
    { tail -n 40 "$OUT/engine_test_build.log"; return 1; }
  "$BUILD/tests/gpu/test_gpu_ops" >"$OUT/engine_test.log" 2>&1 || status=1
  "$BUILD/tests/gpu/test_rope_cache_gpu" >>"$OUT/engine_test.log" 2>&1 || status=1
  "$BUILD/tests/gpu/test_linear_gpu" >>"$OUT/engine_test.log" 2>&1 || status=1
  "$BUILD/tests/gpu/test_engine_gpu" >>"$OUT/engine_test.log" 2>&1 || status=1
  "$BUILD/tests/model/test_cli" --gtest_filter='*Gpu*' >>"$OUT/engine_test.log" 2>&1 || status=1
  # The fused GEMV's shared-memory sums (racecheck) and its in-place residual (memcheck), small cases.
  sanitized_both linear test_linear_gpu '*ResidualInPlace*:*Misaligned*' 120 || status=1
  grep -h '^\[  FAILED  \] .*(' "$OUT/engine_test.log" | head -n 20 || true
  grep -h -B1 -A8 -E "Failure$" "$OUT/engine_test.log" | head -n 40 || true
  grep -h '^\[ measured \]' "$OUT/engine_test.log" | grep -E 'vs bf16run|greedy|linear' || true
  tally "engine (GPU)" "$OUT/engine_test.log"
  return $status
}

# The engine stage's random Qwen2.5-7B-shaped folder, made with transformers (~25 s) if this machine
# has none yet; $1 gets the log.
ENGINE_FOLDER=/tmp/engine-bench/random-qwen2.5-7b-instruct
engine_folder() {
  [[ -d $ENGINE_FOLDER ]] && return 0
  python3 -c "import sys; from pathlib import Path; sys.path.insert(0, 'bench/gpu'); import engine_peers as e; \
e.create_folder(e.config_dir('qwen2.5-7b-instruct'), Path('$ENGINE_FOLDER'), e.SEED, {})" >"$1" 2>&1 ||
    { tail -n 20 "$1"; return 1; }
}

# The 7B folder's test prompt: $1 token ids, the same in every stage.
prompt_ids() { python3 -c "print(','.join(str((i * 7919) % 150000 + 100) for i in range($1)))"; }

# One `generate` on the 7B folder in a fresh process (so its TTFT is a first request's):
#   gen_once LOG LABEL BIN_DIR IDS MAX_TOKENS [VAR=VALUE...] [-- more generate options]
# The run's output goes to LOG; its TTFT/decode line is echoed after LABEL.
gen_once() {
  local log=$1 label=$2 bin=$3 ids=$4 max=$5 envs=()
  shift 5
  while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
  [[ ${1:-} == -- ]] && shift
  env "${envs[@]}" "$bin/flashport" generate --model "$ENGINE_FOLDER" --device gpu --prompt-ids "$ids" \
    --max-tokens "$max" --ignore-eos "$@" >"$log" 2>&1 || true
  echo "$label: $(grep -h -o 'TTFT [0-9.]* ms.*decode [0-9.]* tok/s' "$log")"
}

# Issue 18's figures from a GPU: the doctor's view of this machine, the memory timeline of a 7B run
# (load, prefill, decode; tracked live bytes beside the driver's) and a memtrace summary.
memory_tools() {
  ensure_built
  local status=0 dir=$OUT/memory
  mkdir -p "$dir"
  cmake --build "$BUILD" --parallel "$JOBS" --target flashport_cli test_doctor test_memory_timeline test_memtrace \
    test_cli_memory >"$dir/build.log" 2>&1 || { tail -n 40 "$dir/build.log"; return 1; }
  for t in test_doctor test_memory_timeline test_memtrace; do
    "$BUILD/tests/unit/$t" >"$dir/$t.log" 2>&1 || status=1
    tally "$t" "$dir/$t.log"
  done
  "$BUILD/tests/model/test_cli_memory" >"$dir/test_cli_memory.log" 2>&1 || status=1
  tally "test_cli_memory" "$dir/test_cli_memory.log"
  "$BUILD/bin/flashport" doctor >"$dir/doctor.txt" 2>&1 || echo "doctor: exit $?" >>"$dir/doctor.txt"
  "$BUILD/bin/flashport" doctor --json >"$dir/doctor.json" 2>"$dir/doctor.err" || true
  cat "$dir/doctor.txt"
  engine_folder "$dir/folder.log" || return 1
  "$BUILD/bin/flashport" doctor --model "$ENGINE_FOLDER" --ctx 32768 >"$dir/doctor_model.txt" 2>&1 || true
  grep -E 'model\.' "$dir/doctor_model.txt" || true
  local ids
  ids=$(prompt_ids 512)
  gen_once "$dir/generate.log" "generate 512 + 128, --memory-plot" "$BUILD/bin" "$ids" 128 \
    -- --memory-plot "$dir/generate.svg"
  grep -h 'peak memory' "$dir/generate.log" || true
  "$BUILD/bin/flashport" bench engine --model "$ENGINE_FOLDER" --device gpu --batch 1,8,32 --prompt-len 512 \
    --new-tokens 64 --memory-plot "$dir/bench_engine.svg" >"$dir/bench_engine.log" 2>&1 || status=1
  cat "$dir/bench_engine.log"
  gen_once "$dir/generate_memtrace.log" "generate 512 + 16 under FLASHPORT_MEMTRACE" "$BUILD/bin" "$ids" 16 \
    FLASHPORT_MEMTRACE="$dir/memtrace.log"
  "$BUILD/bin/flashport" memtrace "$dir/memtrace.log" --top 8 >"$dir/memtrace.txt" 2>&1 || status=1
  cat "$dir/memtrace.txt"
  rm -f "$dir/memtrace.log"  # large; the summary is what the note quotes
  # One archive: the device tool brings back only a few files per call.
  tar czf "$OUT/memory.tgz" -C "$OUT" memory && rm -rf "$dir"
  return $status
}

# The random 7B folder of `engine` (made here if missing): where a decode step's time goes,
# per kernel name (ncu, one metric: duration), and bench engine at batch 1 with the BLAS GEMM forced
# (FLASHPORT_GPU_MATMUL=blas) beside the default, same run.
engine_profile() {
  ensure_built
  local folder=$ENGINE_FOLDER
  engine_folder "$OUT/engine_folder.log" || return 1
  # default: GEMV kernels, dependent launches and the decode graph; nopdl: without dependent launches;
  # eager: without the graph; blas: cuBLAS for every product, eager (a graph would record cuBLAS's
  # own kernels).
  for matmul in default nopdl eager blas; do
    local env=(FLASHPORT_DECODE_GRAPH=1)
    [[ $matmul == nopdl ]] && env=(FLASHPORT_GPU_PDL=0)
    [[ $matmul == eager ]] && env=(FLASHPORT_DECODE_GRAPH=0)
    [[ $matmul == blas ]] && env=(FLASHPORT_GPU_MATMUL=blas FLASHPORT_DECODE_GRAPH=0)
    env "${env[@]}" "$BUILD/bin/flashport" bench engine --model "$folder" --device gpu --batch 1,8 --prompt-len 512 \
      --new-tokens 64 --json >"$OUT/engine_matmul_$matmul.json" 2>"$OUT/engine_matmul_$matmul.err" || true
    python3 - "$OUT/engine_matmul_$matmul.json" "$matmul" <<'PY' || true
import json, sys
for r in json.load(open(sys.argv[1]))["runs"]:
    print("matmul %-7s batch %2d: decode %.1f tok/s, step %.3f ms" % (sys.argv[2], r["batch"], r["decode_tok_s"], r["step_ms_median"]))
PY
  done
  # A 4-token prompt and 16 decode steps: the profile is decode kernels, ~28 x 15 per step.
  [[ -n ${ENGINE_PROFILE_NO_NCU:-} ]] && return 0
  # Eager steps (no graph), so every launch is profiled as its own kernel.
  FLASHPORT_DECODE_GRAPH=0 timeout 150 $NCU --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
    "$BUILD/bin/flashport" generate --model "$folder" --device gpu --prompt-ids 1,2,3,4 --max-tokens 16 --ignore-eos \
    >"$OUT/engine_ncu.csv" 2>"$OUT/engine_ncu.err" || true
  python3 bench/gpu/ncu_summary.py "$OUT/engine_ncu.csv" | tee "$OUT/engine_ncu.txt" || true
}

# Where a prefill's time and a run's memory go (the engine stage's folder): the driver timeline of
# `generate` with and without the load-time warm-up (FLASHPORT_DRIVER_TRACE: ms, driver used since
# before loading, tracked live bytes), then ncu's per-kernel times of one 512- and one 4096-token
# prefill (eager, no warm-up, one token generated).
engine_diagnose() {
  ensure_built
  local folder=$ENGINE_FOLDER D=$OUT/diagnose
  mkdir -p "$D"
  engine_folder "$D/folder.log" || return 1
  local p512 p4096
  p512=$(prompt_ids 512) p4096=$(prompt_ids 4096)
  local -A variant=([default]="" [nowarm]="--no-warm-up" [nocheck]="--no-check-weights" [step512]="--max-step-tokens 512")
  for v in default nowarm nocheck step512; do
    # shellcheck disable=SC2086
    FLASHPORT_DRIVER_TRACE=$D/trace_$v.txt "$BUILD/bin/flashport" generate --model "$folder" --device gpu \
      --prompt-ids "$p512" --max-tokens 64 --ignore-eos ${variant[$v]} >"$D/generate_$v.log" 2>&1 || true
    echo "$v: $(grep -h -E 'peak memory|TTFT|tok/s' "$D/generate_$v.log" | tr '\n' ' ' | cut -c1-400)"
    python3 - "$D/trace_$v.txt" <<'PY' || true
import sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
peak = max(rows, key=lambda r: r[1])
print("  trace: %d points, peak %.3f GB at %.0f ms (tracked %.3f GB); last %.3f GB (tracked %.3f)" % (
    len(rows), peak[1] / 1e9, peak[0], peak[2] / 1e9, rows[-1][1] / 1e9, rows[-1][2] / 1e9))
PY
  done
  for n in 512 4096; do
    local ids_n=$p512
    [[ $n == 4096 ]] && ids_n=$p4096
    FLASHPORT_DECODE_GRAPH=0 timeout 200 $NCU --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
      "$BUILD/bin/flashport" generate --model "$folder" --device gpu --no-warm-up --prompt-ids "$ids_n" --max-tokens 1 \
      >"$D/prefill_ncu_$n.csv" 2>"$D/prefill_ncu_$n.err" || true
    python3 bench/gpu/ncu_summary.py "$D/prefill_ncu_$n.csv" >"$D/prefill_ncu_$n.txt" 2>&1 || true
    echo "== prefill $n"; head -n 30 "$D/prefill_ncu_$n.txt"
  done
  # Batched decode (eager, 16-token prompts so the profile is mostly decode steps): where a batch's
  # step goes beside the weights' copy time.
  for b in 8 64; do
    FLASHPORT_DECODE_GRAPH=0 timeout 200 $NCU --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
      "$BUILD/bin/flashport" bench engine --model "$folder" --device gpu --no-warm-up --batch "$b" --prompt-len 16 \
      --new-tokens 8 --reps 1 >"$D/batch_ncu_$b.csv" 2>"$D/batch_ncu_$b.err" || true
    python3 bench/gpu/ncu_summary.py "$D/batch_ncu_$b.csv" >"$D/batch_ncu_$b.txt" 2>&1 || true
    echo "== batch $b decode (8 steps, plus a 16-token prefill per sequence)"; head -n 22 "$D/batch_ncu_$b.txt"
  done
}

decode() {  # the paged decode kernels on their own: a quick build (H200_ARCHS=90) fits with everything
  use_deps
  local t0=$(date +%s) status=0 archs=()
  [[ -n ${H200_ARCHS:-} ]] && archs=(-DCMAKE_CUDA_ARCHITECTURES="$H200_ARCHS")
  cmake --preset cuda -G Ninja -B "$BUILD" -DFLASHPORT_WERROR=OFF -DCMAKE_PREFIX_PATH="$CMAKE_PREFIX_PATH" "${archs[@]}" \
    >"$OUT/decode_build.log" 2>&1
  cmake --build "$BUILD" --parallel "$JOBS" --target test_paged_attention_gpu flashport_bench_paged_attention flashport_bench_ops \
    >>"$OUT/decode_build.log" 2>&1 || { tail -n 40 "$OUT/decode_build.log"; return 1; }
  echo "decode build: $(( $(date +%s) - t0 )) s"
  t0=$(date +%s)
  decode_tests "$OUT/decode_test.log" || status=1
  grep -h -B1 -A8 -E "Failure$|^  FAIL: " "$OUT/decode_test.log" | head -n 60 || true
  tally decode "$OUT/decode_test.log" "$(( $(date +%s) - t0 )) s"
  PYTHONUNBUFFERED=1 python3 bench/gpu/decode_peers.py --bench "$BUILD/bin/flashport_bench_paged_attention" \
    --cases "$BUILD/bin/flashport_bench_ops" --out "$OUT" 2>&1 | tee "$OUT/decode_bench.log" || status=1
  sanitized_both decode test_paged_attention_gpu "$DECODE_SANITIZE_FILTER" 90 "$OUT/decode_" || status=1
  return $status
}

# The portable path's table in one run (bench/gpu/portable_table.py; the header): a quick sm_90 build of
# what it runs, the portable GEMM's and kernels' GPU tests at warp 32, then the table. Arguments go to
# the script (--parts attention,matmul / --parts engine: each part fits a call). PORTABLE_NCU=1 adds an
# ncu profile of the portable flash kernel (bf16 d128 8k) and of the portable GEMM (one 7B product).
portable_stage() {
  use_deps
  local t0=$(date +%s) status=0 P=$OUT/portable
  mkdir -p "$P"
  cmake --preset cuda -G Ninja -B "$BUILD" -DFLASHPORT_WERROR=OFF -DCMAKE_PREFIX_PATH="$CMAKE_PREFIX_PATH" \
    -DCMAKE_CUDA_ARCHITECTURES="${H200_ARCHS:-90}" >"$P/build.log" 2>&1
  cmake --build "$BUILD" --parallel "$JOBS" --target flashport_cli flashport_bench_matmul test_gpu_ops test_gemm_gpu test_attention_gpu test_varlen_gpu \
    >>"$P/build.log" 2>&1 || { tail -n 40 "$P/build.log"; return 1; }
  echo "portable build: $(( $(date +%s) - t0 )) s"
  if [[ -z ${PORTABLE_NO_TESTS:-} ]]; then
    "$BUILD/tests/gpu/test_gpu_ops" >"$P/test_gpu_ops.log" 2>&1 || status=1
    tally "gpu ops (both GEMMs)" "$P/test_gpu_ops.log"
    "$BUILD/tests/gpu/test_gemm_gpu" >"$P/test_gemm_gpu.log" 2>&1 || status=1
    tally "gemm (both backends vs float64)" "$P/test_gemm_gpu.log"
    sharded test_varlen_gpu "$P/test_varlen.log" || status=1
    tally "varlen + paged prefill" "$P/test_varlen.log"
    "$BUILD/tests/gpu/test_attention_gpu" --gtest_filter='*NaiveSubset*:*FlashSubset*Portable*:*FlashNan*Portable*' \
      >"$P/test_attention_portable.log" 2>&1 || status=1
    tally "attention (naive both GEMMs, flash portable)" "$P/test_attention_portable.log"
    grep -h -B1 -A8 -E "Failure$" "$P"/test_*.log | head -n 40 || true
  fi
  PYTHONUNBUFFERED=1 python3 bench/gpu/portable_table.py --flashport "$BUILD/bin/flashport" \
    --bench-matmul "$BUILD/bin/flashport_bench_matmul" --out "$P" "$@" 2>&1 | tee "$P/table.log" || status=1
  if [[ -n ${PORTABLE_NCU:-} ]]; then
    FLASHPORT_GPU_FLASH=portable timeout 200 $NCU --set full -k regex:flash_fwd_portable --launch-count 1 \
      "$BUILD/bin/flashport" bench attention --device gpu --batch 2 --heads 16 --seq 8192 --head-dim 128 --dtype bf16 \
      --impl flash --iters 1 >"$P/ncu_flash_portable_d128.txt" 2>&1 || true
    FLASHPORT_GPU_BLAS=portable timeout 120 $NCU --set full -k regex:gemm --launch-count 1 \
      "$BUILD/bin/flashport_bench_matmul" --shapes 3584x18944 --iters 1 --reps 1 >"$P/ncu_gemm_portable.txt" 2>&1 || true
  fi
  return $status
}

tune() {  # the flash kernels' candidate configs, one process each, same run: `tune [mma|wgmma] [iters reps]`
  # The sweep links the library only: on a machine without a configured build, configure for sm_90 and
  # let the sweep's own target build what it needs (not the whole preset, which ensure_built would).
  if [[ -f $BUILD/CMakeCache.txt ]]; then use_deps; else
    H200_ARCHS=${H200_ARCHS:-90} H200_TARGETS=flashport build >"$OUT/tune_configure.log" 2>&1 ||
      { tail -n 30 "$OUT/tune_configure.log"; return 1; }
  fi
  local t0=$(date +%s) sweep=flash_tiles
  [[ ${1:-} == wgmma ]] && sweep=flash_tiles_wgmma
  [[ ${1:-} == wgmma || ${1:-} == mma ]] && shift
  # TUNE_MAX_HEAD_DIM=64: only the problems and instances up to that head dim (a build of a minute, not ten).
  cmake -B "$BUILD" -DFLASHPORT_TUNING=ON -DFLASHPORT_TUNING_MAX_HEAD_DIM="${TUNE_MAX_HEAD_DIM:-}" >/dev/null
  cmake --build "$BUILD" --parallel "$JOBS" --target "flashport_$sweep" >"$OUT/tune_build.log" 2>&1 ||
    { tail -n 40 "$OUT/tune_build.log"; return 1; }
  echo "tune build: $(( $(date +%s) - t0 )) s"
  "$BUILD/bin/flashport_$sweep" "$@" | tee "$OUT/tune_$sweep.jsonl"
}

# The sources of commit $1 (what a CUDA build of the CLI and bench drivers needs) in build/before-src.
before_tree() {
  local dir=build/before-src
  rm -rf "$dir" && mkdir -p "$dir"
  # tests/support: header-only helpers the bench drivers include (the seeded generator).
  git archive "$1" CMakeLists.txt CMakePresets.json src include apps bench tests/support | tar -x -C "$dir"
  git rev-parse "$1" >"$dir/REVISION"
  echo "before-tree: $(cat "$dir/REVISION") in $dir ($(du -sh "$dir" | cut -f1)); carry it with .deps"
}

compare() {
  local src=$ROOT/build/before-src what=${1:-}
  [[ -f $src/REVISION ]] || { echo "compare: no $src (run 'h200.sh before-tree REV' here and carry it)" >&2; return 1; }
  # The before tree builds beside it, not inside: a carried folder is replaced on every device call.
  local before_build=$ROOT/build/before-h200
  local -A bin=([before]=$before_build/bin [after]=$BUILD/bin)
  local order=(before after)
  mkdir -p "$OUT/compare/before" "$OUT/compare/after"
  echo "compare: before = $(cat "$src/REVISION"), after = this tree"
  case $what in
    build)
      use_deps
      local t0=$(date +%s) status=0 bench_target=flashport_bench_paged_attention
      grep -q "$bench_target" "$src/bench/CMakeLists.txt" || bench_target=flashport_bench_paged_decode  # before issue 12
      H200_ARCHS=90 H200_TARGETS="flashport_cli flashport_bench_paged_attention flashport_bench_ops" build >/dev/null || status=1
      (cd "$src" && cmake --preset cuda -G Ninja -B "$before_build" -DFLASHPORT_WERROR=OFF -DFLASHPORT_TESTS=OFF \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$CMAKE_PREFIX_PATH" >"$OUT/compare/before/build.log" 2>&1 &&
        cmake --build "$before_build" --parallel "$JOBS" --target flashport_cli "$bench_target" \
        >>"$OUT/compare/before/build.log" 2>&1) || { tail -n 30 "$OUT/compare/before/build.log"; status=1; }
      echo "compare build: $(( $(date +%s) - t0 )) s"
      return $status ;;
    decode)
      use_deps
      for t in "${order[@]}"; do
        local bench=${bin[$t]}/flashport_bench_paged_attention
        [[ -x $bench ]] || bench=${bin[$t]}/flashport_bench_paged_decode  # the name before issue 12
        PYTHONUNBUFFERED=1 python3 bench/gpu/decode_peers.py --bench "$bench" --cases "${bin[after]}/flashport_bench_ops" \
          --out "$OUT/compare/$t" --reps 5 \
          >"$OUT/compare/$t/decode.log" 2>&1 || return 1
      done ;;
    attention)
      use_deps
      for t in "${order[@]}"; do
        PYTHONUNBUFFERED=1 python3 bench/gpu/sdpa_peers.py --flashport "${bin[$t]}/flashport" --out "$OUT/compare/$t" \
          >"$OUT/compare/$t/attention.log" 2>&1 || return 1
      done ;;
    engine)
      # The peers' run once (this tree, transformers eager: it writes the random 7B-shaped folder), then
      # `bench engine` on that folder from each tree, twice in turn.
      use_deps
      PYTHONUNBUFFERED=1 python3 bench/gpu/engine_peers.py --flashport "${bin[after]}/flashport" --out "$OUT/compare/after" \
        --skip-sdpa --reps 2 >"$OUT/compare/after/engine_peers.log" 2>&1 || { tail -n 20 "$OUT/compare/after/engine_peers.log"; return 1; }
      local folder
      folder=$(ls -d /tmp/engine-bench/random-* | head -n 1)
      for round in 1 2; do
        for t in "${order[@]}"; do
          "${bin[$t]}/flashport" bench engine --model "$folder" --device gpu --batch 1,32 --prompt-len 512 \
            --new-tokens 128 --reps 2 --seed 0 >>"$OUT/compare/$t/engine.log" 2>&1 || return 1
        done
      done ;;
    *) echo "usage: h200.sh compare build|decode|attention|engine" >&2; return 2 ;;
  esac
  grep -h -E "^\|| ms |tok/s|µs" "$OUT/compare/before/$what.log" "$OUT/compare/after/$what.log" 2>/dev/null | head -n 80 || true
}

# flashport serve against bench engine on a random 7B folder (see the header).
serve_stage() {
  use_deps
  if [[ ! -f $BUILD/build.ninja ]]; then H200_ARCHS=${H200_ARCHS:-90} H200_TARGETS=flashport_cli build; fi
  cmake --build "$BUILD" --parallel "$JOBS" --target flashport_cli >"$OUT/serve_build.log" 2>&1 ||
    { tail -n 40 "$OUT/serve_build.log"; return 1; }
  PYTHONUNBUFFERED=1 python3 bench/gpu/serve_peers.py --flashport "$BUILD/bin/flashport" --out "$OUT" "$@" 2>&1 |
    tee "$OUT/serve.log"
}

# Issue 16's closing run in one call: a quick sm_90 build of what it needs; the GPU tests of the ops it
# changed (sample, argmax, paged decode with the in-kernel merge, the engine's graphs); the sample op's
# and argmax's timings; engine_peers (ours beside transformers); then A/B pairs of `generate` on the same
# folder: the decode merge in the split kernel against the separate combine, greedy against sampled.
issue16_check() {
  local T t0
  stage_start check "flashport_cli flashport_bench_ops test_sample_gpu test_paged_attention_gpu test_gpu_ops \
test_engine_gpu" || return 1
  for t in test_sample_gpu test_gpu_ops test_engine_gpu; do
    timeout 150 "$BUILD/tests/gpu/$t" >"$T/$t.log" 2>&1
    tally "$t" "$T/$t.log"
    grep -h -A6 "Failure$" "$T/$t.log" | head -n 20 || true
  done
  grep -h "measured" "$T/test_sample_gpu.log" | head -n 20 || true
  decode_tests "$T/paged.log" || true
  tally test_paged_attention_gpu "$T/paged.log"
  grep -h -A6 "Failure$" "$T/paged.log" | head -n 20 || true
  "$BUILD/bin/flashport_bench_ops" --device gpu --op argmax >"$T/argmax.jsonl" 2>&1 || true
  python3 -c "
import json, sys
for l in open(sys.argv[1]):
    try: r = json.loads(l)
    except ValueError: continue
    print('argmax %-28s %-5s %8.2f us  %s' % (r['case'], r['dtype'], r['median_us'], r['kernel']))" "$T/argmax.jsonl" | grep -E "152064|no_work" || true
  PYTHONUNBUFFERED=1 timeout 300 python3 bench/gpu/engine_peers.py --flashport "$BUILD/bin/flashport" --out "$OUT/engine" \
    >"$OUT/engine_peers.log" 2>&1 || echo "engine_peers: rc $?"
  tail -n 40 "$OUT/engine_peers.log"
  local ids
  ids=$(prompt_ids 512)
  local qwen=(--temperature 0.7 --top-k 20 --top-p 0.8 --repetition-penalty 1.05 --seed 1)
  for round in 1 2; do
    for v in fused separate greedy sampled; do
      local env=() extra=()
      [[ $v == fused ]] && env=(FLASHPORT_DECODE_COMBINE=fused)
      [[ $v == sampled ]] && extra=("${qwen[@]}")
      gen_once "$T/gen_${v}_$round.log" "$v $round" "$BUILD/bin" "$ids" 256 "${env[@]}" -- "${extra[@]}"
    done
  done
  echo "issue16-check: $(( $(date +%s) - t0 )) s"
}

# ncu's per-kernel times of 16 eager decode steps (4-token prompt) on the 7B folder, into $1/ncu.*,
# and the top kernels by time.
ncu_decode_step() {
  FLASHPORT_DECODE_GRAPH=0 timeout 100 $NCU --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
    "$BUILD/bin/flashport" generate --model "$ENGINE_FOLDER" --device gpu --prompt-ids 1,2,3,4 --max-tokens 16 \
    --ignore-eos >"$1/ncu.csv" 2>"$1/ncu.err" || true
  python3 bench/gpu/ncu_summary.py "$1/ncu.csv" | tee "$1/ncu.txt" | head -n 14 || true
}

# The decode merge in the split kernel on the op's own split counters against the separate combine kernel,
# in one call: a quick sm_90 build, the paged decode and engine GPU tests, then on the 7B folder
# `generate` pairs at 512 and 8192 prompt tokens taking turns, `bench engine` at batch 1-64, and ncu's
# per-kernel times of 16 eager decode steps. Everything lands under $OUT/decode-ab.
decode_ab() {
  local T t0
  stage_start decode-ab "flashport_cli test_paged_attention_gpu test_engine_gpu" || return 1
  decode_tests "$T/paged.log" || true
  tally test_paged_attention_gpu "$T/paged.log"
  timeout 150 "$BUILD/tests/gpu/test_engine_gpu" >"$T/test_engine_gpu.log" 2>&1
  tally test_engine_gpu "$T/test_engine_gpu.log"
  grep -h -A6 "Failure$" "$T/paged.log" "$T/test_engine_gpu.log" | head -n 20 || true
  engine_folder "$T/folder.log" || return 1
  local -A prompt=([512]=$(prompt_ids 512) [8192]=$(prompt_ids 8192))
  for n in 512 8192; do
    for round in 1 2 3; do
      [[ $n == 8192 && $round == 3 ]] && continue
      for v in fused separate; do
        gen_once "$T/gen_${v}_${n}_$round.log" "$v $n round $round" "$BUILD/bin" "${prompt[$n]}" 256 \
          FLASHPORT_DECODE_COMBINE=$v
      done
    done
  done
  "$BUILD/bin/flashport" bench engine --model "$ENGINE_FOLDER" --device gpu --batch 1,8,32,64 --prompt-len 512 \
    --new-tokens 128 --reps 2 --seed 0 >"$T/bench_engine.log" 2>&1 || true
  sed -n '1,8p' "$T/bench_engine.log"
  ncu_decode_step "$T"
  echo "decode-ab: $(( $(date +%s) - t0 )) s"
}

# The A/B stages' common start, in $1: both trees built (compare build, sm_90), this tree's linear,
# ops and engine GPU tests, and test_linear_gpu's measured lines.
trees_built_and_tested() {
  local T=$1 t0 t
  t0=$(date +%s)
  compare build >"$T/build.log" 2>&1 || { tail -n 30 "$T/build.log"; return 1; }
  H200_ARCHS=90 H200_TARGETS="test_gpu_ops test_linear_gpu test_engine_gpu" build >>"$T/build.log" 2>&1 ||
    { tail -n 30 "$T/build.log"; return 1; }
  echo "builds: $(( $(date +%s) - t0 )) s"
  for t in test_linear_gpu test_gpu_ops test_engine_gpu; do
    timeout 150 "$BUILD/tests/gpu/$t" >"$T/$t.log" 2>&1
    tally "$t" "$T/$t.log"
    grep -h -A6 "Failure$" "$T/$t.log" | head -n 20 || true
  done
  grep -h "measured" "$T/test_linear_gpu.log" || true
}

# The GEMV's norm in its own launch (the default; FLASHPORT_GEMV_NORM=apart names it) against the
# norm in the GEMV's prologue (FLASHPORT_GEMV_NORM=fused), this tree only, in one call: a quick sm_90
# build of the CLI and test_linear_gpu, its tests (both kernels in one process) with LinearGpuPerf's
# measured lines, then on the 7B folder `generate` at 512 (three rounds) and 8192
# (one round) prompt tokens taking turns, `bench engine` at batch 1 and 8 each, and ncu's per-kernel
# decode times under each. Everything lands under $OUT/norm-ab.
norm_ab() {
  local T t0 v round n
  stage_start norm-ab "flashport_cli test_linear_gpu" || return 1
  timeout 200 "$BUILD/tests/gpu/test_linear_gpu" >"$T/test_linear_gpu.log" 2>&1 || true
  tally test_linear_gpu "$T/test_linear_gpu.log"
  grep -h -A6 "Failure$" "$T/test_linear_gpu.log" | head -n 20 || true
  grep -h "measured" "$T/test_linear_gpu.log" || true
  engine_folder "$T/folder.log" || return 1
  local -A prompt=([512]=$(prompt_ids 512) [8192]=$(prompt_ids 8192))
  for n in 512 8192; do
    for round in 1 2 3; do
      [[ $n == 8192 && $round -gt 1 ]] && continue
      for v in fused apart; do
        gen_once "$T/gen_${v}_${n}_$round.log" "norm $v $n round $round" "$BUILD/bin" "${prompt[$n]}" 256 \
          FLASHPORT_GEMV_NORM=$v
      done
    done
  done
  for v in fused apart; do
    FLASHPORT_GEMV_NORM=$v "$BUILD/bin/flashport" bench engine --model "$ENGINE_FOLDER" --device gpu --batch 1,8 \
      --prompt-len 512 --new-tokens 128 --reps 2 --seed 0 >"$T/bench_engine_$v.log" 2>&1 || true
    echo "bench engine, norm $v:"
    sed -n '2,4p' "$T/bench_engine_$v.log"
  done
  for v in fused apart; do
    mkdir -p "$T/ncu_$v"
    echo "ncu, norm $v:"
    FLASHPORT_GEMV_NORM=$v ncu_decode_step "$T/ncu_$v"
  done
  echo "norm-ab: $(( $(date +%s) - t0 )) s"
  tar czf "$OUT/norm-ab.tgz" -C "$OUT" norm-ab && rm -rf "$T"  # one file: the device tool brings back few
}

# The matrix-core GEMV for batched decode, in one call: its tests and perf rows, the split-KV tests,
# and bench engine at batch 1-64 with it (FLASHPORT_BATCH_GEMV=mma) and with AUTO's cuBLAS taking turns.
# Everything lands in $OUT/batch-gemv.tgz.
batch_gemv() {
  local T t0 v round
  stage_start batch-gemv "flashport_cli test_linear_gpu test_gpu_ops test_attention_gpu test_gemm_gpu" || return 1
  # wgmma.cuh's layouts (issue 17, item 1's first step), before anything is built on them.
  timeout 60 "$BUILD/tests/gpu/test_gemm_gpu" --gtest_filter='Wgmma*' >"$T/test_wgmma.log" 2>&1 || true
  tally "test_gemm_gpu (wgmma probe)" "$T/test_wgmma.log"
  grep -h -A3 "Failure$" "$T/test_wgmma.log" | head -n 12 || true
  timeout 240 "$BUILD/tests/gpu/test_linear_gpu" >"$T/test_linear_gpu.log" 2>&1 || true
  tally test_linear_gpu "$T/test_linear_gpu.log"
  grep -h "measured" "$T/test_linear_gpu.log" || true
  timeout 150 "$BUILD/tests/gpu/test_gpu_ops" --gtest_filter='*Matmul*:*Linear*' >"$T/test_gpu_ops.log" 2>&1 || true
  tally "test_gpu_ops (matmul, linear)" "$T/test_gpu_ops.log"
  timeout 150 "$BUILD/tests/gpu/test_attention_gpu" --gtest_filter='*SplitKv*' >"$T/test_split_kv.log" 2>&1 || true
  tally "test_attention_gpu (split-KV)" "$T/test_split_kv.log"
  grep -h -A6 "Failure$" "$T"/test_*.log | head -n 30 || true
  engine_folder "$T/folder.log" || return 1
  for round in 1 2; do
    for v in mma auto; do
      env $([[ $v == mma ]] && echo FLASHPORT_BATCH_GEMV=mma) "$BUILD/bin/flashport" bench engine \
        --model "$ENGINE_FOLDER" --device gpu --batch 1,8,16,32,64 --prompt-len 512 --new-tokens 128 --reps 2 \
        --seed 0 >"$T/bench_engine_${v}_$round.log" 2>&1 || true
      echo "bench engine, $v, round $round:"
      sed -n '2,8p' "$T/bench_engine_${v}_$round.log"
    done
  done
  # Per-kernel times of eager batched decode steps (16 sequences), each way.
  for v in mma auto; do
    mkdir -p "$T/ncu_b16_$v"
    env FLASHPORT_DECODE_GRAPH=0 $([[ $v == mma ]] && echo FLASHPORT_BATCH_GEMV=mma) timeout 120 $NCU \
      --metrics gpu__time_duration.sum --print-summary per-kernel --csv "$BUILD/bin/flashport" bench engine \
      --model "$ENGINE_FOLDER" --device gpu --batch 16 --prompt-len 16 --new-tokens 8 --reps 1 --seed 0 \
      >"$T/ncu_b16_$v/ncu.csv" 2>"$T/ncu_b16_$v/ncu.err" || true
    echo "ncu, batch 16, $v:"
    python3 bench/gpu/ncu_summary.py "$T/ncu_b16_$v/ncu.csv" | tee "$T/ncu_b16_$v/ncu.txt" | head -n 16 || true
  done
  echo "batch-gemv: $(( $(date +%s) - t0 )) s"
  tar czf "$OUT/batch-gemv.tgz" -C "$OUT" batch-gemv && rm -rf "$T"
}

# Why the matrix-core GEMV streams slower than the one-token GEMV: ncu's throughput, occupancy, warp
# stall and memory sections on one launch of each on Qwen-7B's gate_up (the GEMV at one token, the
# matrix-core GEMV at 8 and 16). $OUT/tc-diag.tgz.
tc_diag() {
  local T t0 k
  stage_start tc-diag test_linear_gpu || return 1
  local -A filter=([gemv_b1]='LinearGpuPerf.ReportsTimes' [mma_b8]='LinearGpuPerf.BatchReportsTimes'
                   [mma_b16]='LinearGpuPerf.BatchReportsTimes')
  # ncu matches the demangled name, "(flashport::DType)2, (int)1, ...": a dot stands for each bracket.
  local -A kernel=([gemv_b1]='regex:linear_gemv_kernel<.flashport::DType.2, .int.1, .bool.0, .flashport::gpu::Epilogue.2>'
                   [mma_b8]='regex:linear_gemv_mma_kernel<.flashport::DType.2, .int.1, .flashport::gpu::Epilogue.2>'
                   [mma_b16]='regex:linear_gemv_mma_kernel<.flashport::DType.2, .int.2, .flashport::gpu::Epilogue.2>')
  for k in gemv_b1 mma_b8 mma_b16; do
    timeout 120 $NCU --kernel-name-base demangled -k "${kernel[$k]}" -c 1 --section SpeedOfLight --section Occupancy \
      --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats --section SchedulerStats \
      "$BUILD/tests/gpu/test_linear_gpu" --gtest_filter="${filter[$k]}" >"$T/ncu_$k.txt" 2>&1 || true
    echo "== $k"
    grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Stall|Warp Cycles Per Issued|Eligible Warps|Issued Warp|L1/TEX Hit|L2 Hit|Block Limit" \
      "$T/ncu_$k.txt" | head -n 40 || true
  done
  echo "tc-diag: $(( $(date +%s) - t0 )) s"
  tar czf "$OUT/tc-diag.tgz" -C "$OUT" tc-diag && rm -rf "$T"
}

# The projections' epilogues in the GEMM, in one call ($OUT/batch-check.tgz):
# - the linear, matmul and engine tests (the residual in the GEMM; the bias in cuBLASLt's epilogue);
# - the split-KV problems beside SDPA;
# - `generate` 512 + 256 in fresh processes (TTFT, batch-1 decode): now, and as before (both switches
#   off: FLASHPORT_RESIDUAL=add FLASHPORT_MATMUL_BIAS=staged), taking turns;
# - `bench engine` at batch 1-64: now, the bias staged (FLASHPORT_MATMUL_BIAS=staged), and as before;
# - ncu's per-kernel times of eager batch-16 decode steps, now.
batch_check() {
  local T t0 round v ids
  stage_start batch-check "flashport_cli test_linear_gpu test_gpu_ops test_engine_gpu" || return 1
  timeout 150 "$BUILD/tests/gpu/test_linear_gpu" --gtest_filter='-*Perf*' >"$T/test_linear_gpu.log" 2>&1 || true
  tally test_linear_gpu "$T/test_linear_gpu.log"
  timeout 100 "$BUILD/tests/gpu/test_gpu_ops" --gtest_filter='*Matmul*:*Linear*' >"$T/test_gpu_ops.log" 2>&1 || true
  tally "test_gpu_ops (matmul, linear)" "$T/test_gpu_ops.log"
  grep -h "+ bias:" "$T/test_gpu_ops.log" | head -n 6 || true
  timeout 150 "$BUILD/tests/gpu/test_engine_gpu" >"$T/test_engine_gpu.log" 2>&1 || true
  tally test_engine_gpu "$T/test_engine_gpu.log"
  grep -h -A6 "Failure$" "$T"/test_*.log | head -n 30 || true
  bench --only q1_bf16_d128_gqa7_64k,q4_bf16_d128_gqa7_16k_b8 >"$T/sdpa_peers.log" 2>&1 || true
  tail -n 4 "$T/sdpa_peers.log"
  engine_folder "$T/folder.log" || return 1
  local -A envs=([now]="" [staged]="FLASHPORT_MATMUL_BIAS=staged"
                 [before]="FLASHPORT_RESIDUAL=add FLASHPORT_MATMUL_BIAS=staged")
  ids=$(prompt_ids 512)
  for round in 1 2 3; do
    for v in now before; do
      # shellcheck disable=SC2086  # the variables are words
      gen_once "$T/gen_${v}_$round.log" "generate 512 + 256, $v, round $round" "$BUILD/bin" "$ids" 256 ${envs[$v]}
    done
  done
  for round in 1 2; do
    for v in now staged before; do
      env ${envs[$v]} "$BUILD/bin/flashport" bench engine --model "$ENGINE_FOLDER" --device gpu \
        --batch 1,8,16,32,64 --prompt-len 512 --new-tokens 128 --reps 2 --seed 0 \
        >"$T/bench_engine_${v}_$round.log" 2>&1 || true
      echo "bench engine, $v, round $round:"
      sed -n '2,7p' "$T/bench_engine_${v}_$round.log"
    done
  done
  mkdir -p "$T/ncu_b16"
  env FLASHPORT_DECODE_GRAPH=0 timeout 120 $NCU --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
    "$BUILD/bin/flashport" bench engine --model "$ENGINE_FOLDER" --device gpu --batch 16 --prompt-len 16 \
    --new-tokens 8 --reps 1 --seed 0 >"$T/ncu_b16/ncu.csv" 2>"$T/ncu_b16/ncu.err" || true
  echo "ncu, batch 16:"
  python3 bench/gpu/ncu_summary.py "$T/ncu_b16/ncu.csv" | tee "$T/ncu_b16/ncu.txt" | head -n 24 || true
  echo "batch-check: $(( $(date +%s) - t0 )) s"
  tar czf "$OUT/batch-check.tgz" -C "$OUT" batch-check && rm -rf "$T"
}

# The wgmma flash kernel (issue 17, item 1) in one call ($OUT/wgmma-check.tgz): the layout probes
# (wgmma.cuh's, and which offsets read an MN-major B), its tests (the flash grid's Wgmma cases, varlen,
# the plan), memcheck and racecheck on its sanitize row, then issue 17's
# prefill problems beside SDPA with FLASHPORT_GPU_FLASH=wgmma timed next to mma.sync.
wgmma_check() {
  local T t0
  stage_start wgmma-check "flashport_cli test_attention_gpu test_varlen_gpu test_gemm_gpu" || return 1
  # The layout probes first: which descriptor offsets read an MN-major B (V untransposed).
  timeout 60 "$BUILD/tests/gpu/test_gemm_gpu" --gtest_filter='Wgmma*' >"$T/test_wgmma_probes.log" 2>&1 || true
  tally "test_gemm_gpu (wgmma probes)" "$T/test_wgmma_probes.log"
  grep -h "MN-major" "$T/test_wgmma_probes.log" || true
  timeout 200 "$BUILD/tests/gpu/test_attention_gpu" --gtest_filter='*Wgmma*:GpuAttentionPlan.*' \
    >"$T/test_attention_gpu.log" 2>&1 || true
  tally "test_attention_gpu (wgmma)" "$T/test_attention_gpu.log"
  timeout 200 "$BUILD/tests/gpu/test_varlen_gpu" --gtest_filter='*Wgmma*:*BadOffsets*' >"$T/test_varlen_gpu.log" 2>&1 || true
  tally "test_varlen_gpu (wgmma)" "$T/test_varlen_gpu.log"
  grep -h -A6 "Failure$" "$T"/test_*.log | head -n 30 || true
  SANITIZE_TOOLS="memcheck racecheck" sanitize wgmma || true
  cp "$OUT/sanitize.log" "$T/" 2>/dev/null || true
  bench --variants wgmma --only seeds_fp16_d64_4k,bf16_d128_8k,bf16_d128_8k_causal,bf16_d256_8k_causal,sd15_fp16_d40_16k \
    >"$T/sdpa_peers.log" 2>&1 || true
  grep -A7 "== summary" "$T/sdpa_peers.log" || true
  echo "wgmma-check: $(( $(date +%s) - t0 )) s"
  tar czf "$OUT/wgmma-check.tgz" -C "$OUT" wgmma-check && rm -rf "$T"
}

# Where the wgmma flash kernel should serve by default, and what limits it ($OUT/wgmma-auto): mma.sync
# against wgmma on the engine's prefill attention (Qwen2.5-7B: 28 query heads over 4 KV heads, d128,
# bf16, causal) at 512-8192 tokens, and seeds' d64 problem; then one ncu profile (speed of light,
# compute pipes, warp stalls, scheduler, shared-memory bank conflicts) of the wgmma kernel on bf16 d128 8k.
wgmma_auto() {
  local T t0
  stage_start wgmma-auto flashport_cli || return 1
  local cli=$BUILD/bin/flashport
  for n in 512 1024 2048 4096 8192; do
    for v in mma wgmma; do
      echo "== engine prefill attention, $n tokens, $v: $(FLASHPORT_GPU_FLASH=$v timeout 60 "$cli" bench attention \
        --device gpu --batch 1 --heads 28 --kv-heads 4 --q-len $n --kv-len $n --head-dim 128 --dtype bf16 --causal \
        --impl flash --iters 20 2>&1 | grep -E "^ *flash" | tr -s ' ')"
    done
  done | tee "$T/auto.log"
  timeout 120 $NCU --kernel-name regex:flash_fwd_wgmma --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section MemoryWorkloadAnalysis_Tables \
    env FLASHPORT_GPU_FLASH=wgmma "$cli" bench attention --device gpu --batch 2 --heads 16 --q-len 8192 \
    --kv-len 8192 --head-dim 128 --dtype bf16 --impl flash --iters 3 >"$T/ncu.log" 2>&1 || true
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible|Stall|Tensor|Bank|Pipe|Registers|Achieved Occupancy|Warp Cycles" \
    "$T/ncu.log" | head -n 60
  echo "wgmma-auto: $(( $(date +%s) - t0 )) s"
}

# AUTO's wgmma at head dim 128 ($OUT/wgmma-default): the attention, varlen and engine GPU tests under the
# default variant (sharded), then the engine's prefill attention shape at 4096 tokens, AUTO against mma.
wgmma_default() {
  local T t0
  stage_start wgmma-default "flashport_cli test_attention_gpu test_varlen_gpu test_engine_gpu" || return 1
  for t in test_attention_gpu test_varlen_gpu test_engine_gpu; do
    timeout 150 bash -c "$(declare -f sharded); BUILD=$BUILD sharded $t $T/$t.log" || true
    tally "$t" "$T/$t.log"
  done
  grep -h -A6 "Failure$" "$T"/test_*.log | head -n 30 || true
  for v in auto mma; do
    echo "== 4096 tokens, $v: $(FLASHPORT_GPU_FLASH=$v timeout 60 "$BUILD/bin/flashport" bench attention --device gpu \
      --batch 1 --heads 28 --kv-heads 4 --q-len 4096 --kv-len 4096 --head-dim 128 --dtype bf16 --causal \
      --impl flash --iters 20 2>&1 | grep -E "^ *flash" | tr -s ' ')"
  done
  echo "wgmma-default: $(( $(date +%s) - t0 )) s"
}

# Split-KV in the varlen API (issue 17, item 4), in one call: its tests (varlen and dense split-KV, and
# the paged prefill's wgmma route, forced) and
# the decode kernels' tests on the H200, memcheck and racecheck on its small cases, then ops_peers'
# varlen problems with split-KV (the default) and without it (FLASHPORT_GPU_SPLIT_KV=0: the flash
# kernel on the same shapes), and the dense q1/q4 problems the same two ways: the rule's measurement.
tma_check() {
  local T t0 tma
  stage_start tma-check "flashport_cli test_attention_gpu test_varlen_gpu" || return 1
  timeout 120 "$BUILD/tests/gpu/test_attention_gpu" --gtest_filter='*Wgmma*:GpuAttentionPlan.*' \
    >"$T/test_attention_gpu.log" 2>&1 || true
  tally "test_attention_gpu (wgmma; WgmmaTma: the TMA route on)" "$T/test_attention_gpu.log"
  timeout 150 "$BUILD/tests/gpu/test_varlen_gpu" --gtest_filter='*Wgmma*:*BadOffsets*' >"$T/test_varlen_gpu.log" 2>&1 ||
    true
  tally "test_varlen_gpu (wgmma; WgmmaTma: the route on, packed and paged)" "$T/test_varlen_gpu.log"
  grep -h -A6 "Failure$" "$T"/test_*.log | head -n 30 || true
  for tma in 1 0; do
    FLASHPORT_GPU_WGMMA_TMA=$tma timeout 150 python3 bench/gpu/sdpa_peers.py --flashport "$BUILD/bin/flashport" \
      --out "$T/sdpa-tma$tma" --variants wgmma \
      --only seeds_fp16_d64_4k,bf16_d128_8k,bf16_d128_8k_causal,bf16_d256_8k_causal,sd15_fp16_d40_16k \
      >"$T/sdpa_tma$tma.log" 2>&1 || true
    echo "== FLASHPORT_GPU_WGMMA_TMA=$tma"
    grep -A7 "ours flash wgmma" "$T/sdpa_tma$tma.log" || tail -n 5 "$T/sdpa_tma$tma.log"
  done
  # Last, as the slowest part (a call's limit may cut it): the rows' filters take the WgmmaTma cases too.
  SANITIZE_TOOLS="memcheck racecheck" sanitize wgmma wgmma_varlen || true
  cp "$OUT/sanitize.log" "$T/" 2>/dev/null || true
  echo "tma-check: $(( $(date +%s) - t0 )) s"
}
# Issue 17's closing table, in one call with the build's defaults: sdpa_peers' every problem (prefill,
# and the dense API's few queries against a long KV), decode_peers (b1_32k, b64_8k), then the limits:
# ncu's speed-of-light and compute sections on the wgmma kernel at d64 and d256 (bf16, 8k causal for
# d256) and the HGMMA count of each wgmma kernel in the SASS.
attention_table() {
  local T t0 d
  stage_start attention-table "flashport_cli flashport_bench_paged_attention flashport_bench_ops" || return 1
  timeout 240 python3 bench/gpu/sdpa_peers.py --flashport "$BUILD/bin/flashport" --out "$T/sdpa" --variants auto \
    >"$T/sdpa.log" 2>&1 || true
  sed -n '/== summary/,$p' "$T/sdpa.log" || true
  timeout 120 python3 bench/gpu/decode_peers.py --bench "$BUILD/bin/flashport_bench_paged_attention" \
    --cases "$BUILD/bin/flashport_bench_ops" --out "$T/decode" >"$T/decode.log" 2>&1 || true
  tail -n 25 "$T/decode.log"
  for d in 64 256; do
    timeout 60 $NCU --kernel-name regex:flash_fwd_wgmma --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy \
      "$BUILD/bin/flashport" bench attention --device gpu --batch 2 --heads 16 --q-len 8192 --kv-len 8192 \
      --head-dim $d --dtype bf16 --causal --impl flash --iters 4 >"$T/ncu_d$d.txt" 2>&1 || true
    echo "== ncu d$d"
    grep -E "Duration|Throughput|Pipe|Registers|Achieved Occupancy|Executed Ipc" "$T/ncu_d$d.txt" | head -n 20 || true
  done
  command -v cuobjdump >/dev/null || PATH=$PATH:/usr/local/cuda/bin
  cuobjdump -sass "$BUILD/bin/flashport" 2>/dev/null |
    awk '/Function :/ { f = $3 } /HGMMA/ && f ~ /wgmma/ { c[f]++ } END { for (k in c) print c[k], k }' |
    sort -k2 | head -n 40 >"$T/hgmma.txt" || true
  echo "== HGMMA per wgmma kernel: $(wc -l <"$T/hgmma.txt") kernels"; head -n 12 "$T/hgmma.txt"
  echo "attention-table: $(( $(date +%s) - t0 )) s"
}
# Issue 16's TTFT at 4096 tokens with this build's defaults, beside transformers (sdpa) in the same call:
# the random 7B folder is created by transformers, which then times its own 4096-token forward (median
# of 3 after a warm-up) before it is freed; then our `generate` in fresh processes, twice with the
# defaults and once with the TMA route off.
ttft_4096() {
  local T t0 ids round
  stage_start ttft-4096 "flashport_cli" || return 1
  ids=$(prompt_ids 4096)
  [[ -d $ENGINE_FOLDER ]] && echo "(folder existed: transformers not timed)"
  [[ -d $ENGINE_FOLDER ]] || timeout 240 python3 - "$ENGINE_FOLDER" "$ids" <<'PY' 2>&1 | grep -E "^hf|Error" || true
import statistics, sys
from pathlib import Path
sys.path.insert(0, "bench/gpu")
import engine_peers as e
import torch
state = {}
e.create_folder(e.config_dir("qwen2.5-7b-instruct"), Path(sys.argv[1]), e.SEED, state)
model = state["model"]
e.set_attention(model, "sdpa")
ids = torch.tensor([[int(x) for x in sys.argv[2].split(",")]], device="cuda")
e.hf_generate(model, ids, 1)
runs = [t * 1e3 for t in e.hf_ttft_runs(model, ids, 3)]
print("hf sdpa TTFT 4096: %.1f ms (runs %s)" % (statistics.median(runs), ", ".join("%.1f" % r for r in runs)))
PY
  for round in 1 2; do
    gen_once "$T/default_$round.log" "ours, defaults, round $round" "$BUILD/bin" "$ids" 16
  done
  gen_once "$T/notma.log" "ours, FLASHPORT_GPU_WGMMA_TMA=0" "$BUILD/bin" "$ids" 16 FLASHPORT_GPU_WGMMA_TMA=0
  echo "ttft-4096: $(( $(date +%s) - t0 )) s"
}
# Issue 16's TTFT at 4096 tokens, taken apart: transformers' warm TTFT and its kernels (torch.profiler),
# ours warm (`bench engine`, 2048- and 4096-token steps) and as a first request, and our kernels under ncu
# at the card's own clocks; bench/gpu/prefill_profile.py sums both by kernel family.
prefill_profile() {
  local T t0 ids step round
  stage_start prefill-profile "flashport_cli test_gpu_ops" || return 1
  timeout 120 "$BUILD/tests/gpu/test_gpu_ops" --gtest_filter='*Swiglu*:*Elementwise*:*SharedCases*' \
    >"$T/test_gpu_ops.log" 2>&1 || true
  tally "test_gpu_ops (elementwise)" "$T/test_gpu_ops.log"
  ids=$(prompt_ids 4096)
  timeout 300 python3 bench/gpu/prefill_profile.py hf --folder "$ENGINE_FOLDER" --ids "$ids" --out "$T" \
    >"$T/hf.log" 2>&1 || tail -n 20 "$T/hf.log"
  grep -E "^hf" "$T/hf.log" || true
  for round in 1 2; do
    gen_once "$T/first_$round.log" "ours, first request (generate), round $round" "$BUILD/bin" "$ids" 2
  done
  for step in 2048 4096; do
    timeout 120 "$BUILD/bin/flashport" bench engine --model "$ENGINE_FOLDER" --device gpu --batch 1 --prompt-len 4096 \
      --new-tokens 2 --reps 5 --max-step-tokens "$step" --json >"$T/warm_$step.json" 2>"$T/warm_$step.err" || true
    echo "ours warm (bench engine), steps of $step: TTFT $(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); \
b=r['runs'][0]; print('%.1f ms, runs %s' % (b['ttft_ms'], b['ttft_ms_runs']))" \
      "$T/warm_$step.json" 2>&1 | tail -n 1)"
  done
  FLASHPORT_DECODE_GRAPH=0 timeout 240 $NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --print-summary per-kernel --csv "$BUILD/bin/flashport" generate --model "$ENGINE_FOLDER" --device gpu \
    --prompt-ids "$ids" --max-tokens 1 >"$T/ours_ncu.csv" 2>"$T/ours_ncu.err" || tail -n 5 "$T/ours_ncu.err"
  python3 bench/gpu/prefill_profile.py ours --csv "$T/ours_ncu.csv" --out "$T" || true
  python3 bench/gpu/prefill_profile.py table --out "$T" | tee "$T/table.md" || true
  # The timeline, where nsys is installed: the GPU's idle gaps inside one first request.
  local nsys
  nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -n 1 || true)
  if [[ -n $nsys ]]; then
    timeout 200 "$nsys" profile -o "$T/gen" --force-overwrite true "$BUILD/bin/flashport" generate --model "$ENGINE_FOLDER" \
      --device gpu --prompt-ids "$ids" --max-tokens 2 >"$T/nsys.log" 2>&1 &&
      timeout 120 "$nsys" stats --report cuda_gpu_trace --format csv --output "$T/trace" "$T/gen.nsys-rep" >>"$T/nsys.log" 2>&1
    python3 bench/gpu/prefill_profile.py gaps --csv "$(ls "$T"/trace*.csv | head -n 1)" || tail -n 5 "$T/nsys.log"
  else
    echo "nsys: not installed here (no timeline)"
  fi
  rm -f "$T"/*.nsys-rep "$T"/*.sqlite
  tar -czf "$OUT/prefill-profile.tgz" -C "$OUT" prefill-profile && rm -rf "$T"
  echo "prefill-profile: $(( $(date +%s) - t0 )) s"
}
# The causal tile order (attention_sequence.cuh, longest_first_over_heads): the mma and wgmma grids
# (dense, varlen, paged, NaN and bad-offset cases) in 8 shards, then the engine's prefill shapes timed
# with the order over heads (auto) and head by head (FLASHPORT_GPU_TILE_ORDER=per-head), turns taken.
order_check() {
  local T t0 shape order round
  stage_start order-check "flashport_cli test_attention_gpu test_varlen_gpu" || return 1
  GTEST_FILTER='*Mma*:*Wgmma*:*SplitKv*:*Selection*:*Plan*' timeout 240 bash -c \
    "$(declare -f sharded); BUILD=$BUILD sharded test_attention_gpu $T/test_attention.log" || true
  tally "test_attention_gpu (mma, wgmma)" "$T/test_attention.log"
  timeout 150 bash -c "$(declare -f sharded); BUILD=$BUILD sharded test_varlen_gpu $T/test_varlen.log" || true
  tally "test_varlen_gpu" "$T/test_varlen.log"
  grep -h '^\[  FAILED  \] .*(' "$T"/test_*.log | head -n 10 || true
  for shape in "2048 2048" "2048 4096" "4096 4096" "8192 8192"; do
    for round in 1 2; do
      for order in auto per-head; do
        read -r ql kl <<<"$shape"
        echo "q $ql kv $kl, order $order, round $round: $(FLASHPORT_GPU_TILE_ORDER=$order timeout 60 "$BUILD/bin/flashport" \
          bench attention --device gpu --batch 1 --heads 28 --kv-heads 4 --q-len "$ql" --kv-len "$kl" --head-dim 128 \
          --dtype bf16 --causal --impl flash --iters 20 2>&1 | grep -E '^ *flash' | tr -s ' ' | head -n 1)"
      done
    done
  done
  echo "order-check: $(( $(date +%s) - t0 )) s"
}
# Issue 16's decode figures on this tree: the engine and ops tests, the copy rate (the bandwidth limit),
# `generate` 512 + 256 in fresh processes (decode tok/s, first-request TTFT) and `bench engine` at batch
# 1, 8, 32 and 64 (512 + 128: decode ms a step).
decode_table() {
  local T t0 ids round
  stage_start decode-table "flashport_cli test_engine_gpu test_gpu_ops" || return 1
  for t in test_engine_gpu test_gpu_ops; do
    timeout 150 "$BUILD/tests/gpu/$t" >"$T/$t.log" 2>&1 || true
    tally "$t" "$T/$t.log"
  done
  engine_folder "$T/folder.log" || return 1
  python3 -c "import sys; sys.path.insert(0, 'bench/gpu'); import engine_peers as e; r = e.copy_bandwidth(); \
print('copy: %.0f GB/s; the weights (15.23 GB) once: %.2f ms, %.1f tok/s' % (r['gb_per_s'], 15.23e9 / r['gb_per_s'] / 1e6, \
r['gb_per_s'] / 15.23))" 2>&1 | tail -n 1
  ids=$(prompt_ids 512)
  for round in 1 2; do gen_once "$T/gen_$round.log" "generate 512 + 256, round $round" "$BUILD/bin" "$ids" 256; done
  timeout 200 "$BUILD/bin/flashport" bench engine --model "$ENGINE_FOLDER" --device gpu --batch 1,8,32,64 --prompt-len 512 \
    --new-tokens 128 >"$T/bench_engine.txt" 2>&1 || true
  cat "$T/bench_engine.txt"
  echo "decode-table: $(( $(date +%s) - t0 )) s"
}
# The weights in one GPU buffer (WeightPlacer's arena): the engine tests, then the driver's peaks
# beside weights + KV pool + 0.5 GB: `generate` at 512 and 4096 tokens, `bench engine` at batch 8 and 64.
memory_check() {
  local T t0 n
  stage_start memory-check "flashport_cli test_engine_gpu" || return 1
  timeout 150 "$BUILD/tests/gpu/test_engine_gpu" >"$T/test_engine_gpu.log" 2>&1 || true
  tally test_engine_gpu "$T/test_engine_gpu.log"
  engine_folder "$T/folder.log" || return 1
  for n in 512 4096; do
    "$BUILD/bin/flashport" generate --model "$ENGINE_FOLDER" --device gpu --prompt-ids "$(prompt_ids $n)" \
      --max-tokens 64 --ignore-eos >"$T/gen_$n.log" 2>&1 || true
    echo "generate $n + 64: $(grep -h -o 'TTFT.*' "$T/gen_$n.log")"
  done
  timeout 150 "$BUILD/bin/flashport" bench engine --model "$ENGINE_FOLDER" --device gpu --batch 8,64 --prompt-len 512 \
    --new-tokens 32 >"$T/bench.txt" 2>&1 || true
  cat "$T/bench.txt"
  echo "memory-check: $(( $(date +%s) - t0 )) s"
}
# Issue 16's TTFT at 4096 tokens with the paged prefill on each attention route, fresh processes taking
# turns (two rounds): wgmma with the TMA route on and off, and mma.sync.
tma_engine() {
  local T t0 ids round
  stage_start tma-engine "flashport_cli" || return 1
  engine_folder "$T/folder.log" || return 1
  ids=$(prompt_ids 4096)
  for round in 1 2; do
    gen_once "$T/tma_$round.log" "wgmma + TMA, round $round" "$BUILD/bin" "$ids" 16 FLASHPORT_GPU_WGMMA_TMA=1
    gen_once "$T/notma_$round.log" "wgmma, round $round" "$BUILD/bin" "$ids" 16 FLASHPORT_GPU_WGMMA_TMA=0
    gen_once "$T/mma_$round.log" "mma.sync, round $round" "$BUILD/bin" "$ids" 16 FLASHPORT_GPU_FLASH=mma
  done
  echo "tma-engine: $(( $(date +%s) - t0 )) s"
}
# transformers' rendering of the tool-calling cases against the committed @huggingface/jinja goldens.
tool_goldens() {
  mkdir -p "$OUT/tool-goldens"
  python3 tools/tokenizer/make_chat_goldens.py --tools --out "$OUT/tool-goldens/chat_tool_goldens.json"
  if python3 -c "import json, sys; a, b = (json.load(open(p))['goldens'] for p in sys.argv[1:]); sys.exit(a != b)" \
    "$OUT/tool-goldens/chat_tool_goldens.json" tests/data/tokenizer/chat_tool_goldens.json; then
    echo "tool-goldens: transformers renders every case as the committed goldens"
  else
    echo "tool-goldens: DIFFERENT from the committed goldens (commit transformers' file: $OUT/tool-goldens)"
  fi
}
varlen_split() {
  local T t0 split
  stage_start varlen-split "flashport_cli test_varlen_gpu test_attention_gpu test_paged_attention_gpu flashport_bench_ops" || return 1
  timeout 150 "$BUILD/tests/gpu/test_varlen_gpu" \
    --gtest_filter='*SplitKv*:*BadOffsets*:*VarlenGpuPlan*:*PagedPrefillGpu.Wgmma*' >"$T/test_varlen_split.log" 2>&1 || true
  tally "test_varlen_gpu (split-KV, paged prefill on wgmma)" "$T/test_varlen_split.log"
  timeout 120 "$BUILD/tests/gpu/test_attention_gpu" --gtest_filter='*SplitKv*:*GpuAttentionPlan*' \
    >"$T/test_split_kv.log" 2>&1 || true
  tally "test_attention_gpu (split-KV)" "$T/test_split_kv.log"
  timeout 150 bash -c "$(declare -f sharded); BUILD=$BUILD sharded test_paged_attention_gpu $T/test_decode.log" || true
  tally "test_paged_attention_gpu" "$T/test_decode.log"
  grep -h -A6 "Failure$" "$T"/test_*.log | head -n 30 || true
  sanitized_both "varlen split-KV" test_varlen_gpu '*VarlenSplitKv.Default*seqs3x0_2x1200*:*VarlenSplitKvBadOffsets*' \
    120 "$T/sanitize_" || true
  for split in 1 0; do
    FLASHPORT_GPU_SPLIT_KV=$split timeout 200 python3 bench/gpu/ops_peers.py --bench "$BUILD/bin/flashport_bench_ops" \
      --out "$T/varlen-split$split" --op attention_varlen --dtype bf16 >"$T/ops_split$split.log" 2>&1 || true
    echo "== attention_varlen, FLASHPORT_GPU_SPLIT_KV=$split"
    tail -n 20 "$T/ops_split$split.log"
    FLASHPORT_GPU_SPLIT_KV=$split timeout 120 python3 bench/gpu/sdpa_peers.py --flashport "$BUILD/bin/flashport" \
      --out "$T/dense-split$split" --only q1_bf16_d128_gqa7_64k,q4_bf16_d128_gqa7_16k_b8 >"$T/sdpa_split$split.log" 2>&1 || true
    echo "== dense q1/q4, FLASHPORT_GPU_SPLIT_KV=$split"
    tail -n 12 "$T/sdpa_split$split.log"
  done
  echo "varlen-split: $(( $(date +%s) - t0 )) s"
}

# A decode change, before (build/before-src, carried: `h200.sh before-tree REV` here) against this tree
# in one run: both trees' CLI (sm_90), this tree's linear/ops/engine GPU tests and their measured lines,
# then on the 7B folder `generate` at 512 and 8192 prompt tokens (256 new) with the trees taking turns,
# `bench engine` at batch 1-64 from each, and ncu's per-kernel times of 16 eager decode steps (this
# tree). Everything lands under $OUT/decode-trees.
decode_trees() {
  local T=$OUT/decode-trees t0
  mkdir -p "$T"
  t0=$(date +%s)
  trees_built_and_tested "$T" || return 1
  local -A bin=([before]=$ROOT/build/before-h200/bin [after]=$BUILD/bin)
  engine_folder "$T/folder.log" || return 1
  local -A prompt=([512]=$(prompt_ids 512) [8192]=$(prompt_ids 8192))
  # DECODE_TREES_QUICK=1: two rounds at 512 tokens only, no bench engine and no ncu (a short device budget).
  local quick=${DECODE_TREES_QUICK:-}
  for n in 512 8192; do
    [[ -n $quick && $n == 8192 ]] && continue
    for round in 1 2 3; do
      [[ ($n == 8192 || -n $quick) && $round == 3 ]] && continue
      for tree in before after; do
        gen_once "$T/gen_${tree}_${n}_$round.log" "$tree $n round $round" "${bin[$tree]}" "${prompt[$n]}" 256
      done
    done
  done
  # This tree's default (the norms in their own launches) against FLASHPORT_GEMV_NORM=fused (in the
  # GEMV's prologue).
  for round in 1 2; do
    for v in fused apart; do
      gen_once "$T/gen_norm_${v}_$round.log" "norm $v 512 round $round" "${bin[after]}" "${prompt[512]}" 256 \
        FLASHPORT_GEMV_NORM=$v
    done
  done
  [[ -n $quick ]] && { echo "decode-trees (quick): $(( $(date +%s) - t0 )) s"; return 0; }
  for tree in before after; do
    "${bin[$tree]}/flashport" bench engine --model "$ENGINE_FOLDER" --device gpu --batch 1,8,32,64 --prompt-len 512 \
      --new-tokens 128 --reps 2 --seed 0 >"$T/bench_engine_$tree.log" 2>&1 || true
    echo "bench engine, $tree:"
    sed -n '2,6p' "$T/bench_engine_$tree.log"
  done
  ncu_decode_step "$T"
  echo "decode-trees: $(( $(date +%s) - t0 )) s"
}

# Issue 16's prefill kernels, before against after in one run (build/before-src carried: `h200.sh
# before-tree REV` here): both trees built (sm_90), this tree's GPU tests of the changed ops, the ops
# bench's swiglu / add / rms_norm rows from both trees, then on the 7B folder `generate`'s TTFT at 512
# and 4096 tokens (a fresh process each time: the first request) and `bench engine` at batch 1 and 32,
# trees taking turns. Everything lands under $OUT/prefill.
prefill_ab() {
  local T=$OUT/prefill t0 tree op
  mkdir -p "$T"
  t0=$(date +%s)
  trees_built_and_tested "$T" || return 1
  local -A bin=([before]=$ROOT/build/before-h200/bin [after]=$BUILD/bin)
  for tree in before after; do
    for op in swiglu add rms_norm; do
      "${bin[$tree]}/flashport_bench_ops" --device gpu --op $op >"$T/ops_${op}_$tree.jsonl" 2>&1 || true
    done
  done
  python3 - "$T" <<'PY' || true
import glob, json, os, sys
rows = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "ops_*.jsonl"))):
    tree = path.rsplit("_", 1)[1].split(".")[0]
    for line in open(path):
        try: r = json.loads(line)
        except ValueError: continue
        if r.get("dtype") == "bf16": rows.setdefault((r["op"], r["case"]), {})[tree] = r["median_us"]
for (op, case), t in sorted(rows.items()):
    b, a = t.get("before"), t.get("after")
    ratio = "%.2fx" % (b / a) if a and b else ""
    print("%-8s %-22s before %8s us  after %8s us  %s" % (op, case, "%.2f" % b if b else "-", "%.2f" % a if a else "-", ratio))
PY
  engine_folder "$T/folder.log" || return 1
  local -A prompt=([512]=$(prompt_ids 512) [4096]=$(prompt_ids 4096))
  for round in 1 2 3; do
    for tree in before after; do
      for n in 512 4096; do
        gen_once "$T/gen_${tree}_${n}_$round.log" "$tree $n round $round" "${bin[$tree]}" "${prompt[$n]}" 64
      done
    done
  done
  for tree in before after; do
    "${bin[$tree]}/flashport" bench engine --model "$ENGINE_FOLDER" --device gpu --batch 1,32 --prompt-len 512 \
      --new-tokens 64 --reps 2 --seed 0 >"$T/bench_engine_$tree.log" 2>&1 || true
    echo "bench engine, $tree:"
    grep -h -E "batch|TTFT|tok/s" "$T/bench_engine_$tree.log" | head -n 12
  done
  # Batch-1 decode with RoPE and the cache write in the qkv GEMV (default) or in their own launch.
  for round in 1 2 3; do
    for v in epilogue separate; do
      local env=()
      [[ $v == separate ]] && env=(FLASHPORT_QKV_ROPE=separate)
      gen_once "$T/gen_rope_${v}_$round.log" "qkv rope $v round $round" "$BUILD/bin" "${prompt[512]}" 256 "${env[@]}"
    done
  done
  echo "prefill-ab: $(( $(date +%s) - t0 )) s"
}

# tests/serve/test_serve_gpu.py on the H200: the server's tokens sampled on the GPU against generate's.
serve_check() {
  use_deps
  if [[ ! -x $BUILD/bin/flashport ]]; then H200_ARCHS=${H200_ARCHS:-90} H200_TARGETS=flashport_cli build; fi
  FLASHPORT_BIN=$BUILD/bin/flashport FP_TINY_KJV_DIR=$ROOT/models/tiny-kjv timeout 300 python3 tests/serve/test_serve_gpu.py 2>&1 |
    tee "$OUT/serve_gpu.log"
  return "${PIPESTATUS[0]}"
}

# The PyTorch package on CUDA (see the header): build, tests, timings; no step stops the later ones.
torch_stage() {
  local T=$OUT/torch tb=$ROOT/build/h200-torch start deadline
  start=$(date +%s)
  local budget=${TORCH_STAGE_SECONDS:-570}
  deadline=$((start + budget))
  mkdir -p "$T"
  # Seconds a step may take: what is left, less the reserve (given for the 570 s default, scaled to
  # TORCH_STAGE_SECONDS) that the steps after it need.
  left() { local l=$((deadline - $(date +%s) - ${1:-0} * budget / 570)); ((l > 10)) && echo "$l" || echo 10; }
  note() { echo "$*" | tee -a "$T/summary.txt"; }
  # With .deps carried, one tree builds the extension and flashport_bench_ops (the C++ call that
  # torch_peers.py times the op against) from one compile of the library; without, the extension alone.
  local mode=(-DFLASHPORT_TORCH_ONLY=ON) targets=(flashport_torch)
  if ls .deps/*.deb >/dev/null 2>&1; then
    use_deps
    mode=(-DFLASHPORT_TORCH=ON -DFLASHPORT_TORCH_ONLY=OFF)
    targets+=(flashport_bench_ops)
  else
    export PATH=$PATH:/usr/local/cuda/bin
  fi
  export PYTHONUNBUFFERED=1
  local py prefix lib=$ROOT/python/flashport/libflashport_torch_cuda.so
  py=$(command -v python3)
  prefix=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
  {
    echo "== environment"
    python3 -c 'import sys, torch; print("python", sys.version.split()[0], sys.executable); print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "gpu", torch.cuda.get_device_name() if torch.cuda.is_available() else None); print("cxx11 abi", torch.compiled_with_cxx11_abi())' 2>&1 || true
    python3 -c 'import transformers; print("transformers", transformers.__version__)' 2>&1 | tail -n 1 || true
    { nvcc --version 2>&1 | tail -n 2; cmake --version | head -n 1; } || true
    echo "torch cmake prefix: $prefix"
  } >"$T/build.log" 2>&1
  rm -f "$lib"
  # CMake's Torch config (Caffe2's cuda.cmake) looks for the toolkit, nvtx3 and cuDNN: point it at the
  # toolkit nvcc belongs to and at nvtx3's headers there; cuDNN and kineto are only warnings for consumers.
  local cuda_root
  cuda_root=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
  echo "== configure (cmake, Torch_DIR=$prefix/Torch, CUDA $cuda_root)" >>"$T/build.log"
  if timeout "$(left 420)" cmake -S . -B "$tb" -G Ninja -DCMAKE_BUILD_TYPE=Release "${mode[@]}" \
      -DFLASHPORT_CUDA=ON -DFLASHPORT_WERROR=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DFLASHPORT_TORCH_PYTHON="$py" \
      -DTorch_DIR="$prefix/Torch" -DCMAKE_PREFIX_PATH="$prefix${CMAKE_PREFIX_PATH:+;$CMAKE_PREFIX_PATH}" \
      -DCUDAToolkit_ROOT="$cuda_root" -DCUDA_TOOLKIT_ROOT_DIR="$cuda_root" -DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc" \
      -DUSE_SYSTEM_NVTX=ON -Dnvtx3_dir="$cuda_root/include" >>"$T/build.log" 2>&1 &&
    echo "== build (ninja, $JOBS jobs)" >>"$T/build.log" &&
    timeout "$(left 300)" cmake --build "$tb" --parallel "$JOBS" --target "${targets[@]}" >>"$T/build.log" 2>&1; then
    note "torch build (cmake): ok in $(( $(date +%s) - start )) s"
  else
    note "torch build (cmake): FAILED after $(( $(date +%s) - start )) s (a step that ran out of time says so last in" \
      "build.log as 'Terminated' or ninja's 'interrupted'); first errors:"
    grep -m 15 -E "CMake Error|error:|Error [0-9]|undefined reference|No such file" "$T/build.log" | tee -a "$T/summary.txt" || true
    torch_manual_link "$T" "$tb" "$cuda_root" "$lib" && note "torch build (manual link): ok" ||
      note "torch build (manual link): FAILED (see build.log)"
  fi
  [[ -f $lib ]] || { note "no $lib: the Python steps will fail to import flashport"; }
  export PYTHONPATH=$ROOT/python FLASHPORT_TORCH_LIB=$lib FLASHPORT_TORCH_REQUIRED=1 OMP_NUM_THREADS=4
  local xdist=()
  python3 -c 'import xdist' 2>/dev/null && xdist=(-n 4)
  local rc=0
  timeout "$(left 200)" python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_torch_gpu.py >"$T/pytest_gpu.log" 2>&1 ||
    rc=$?
  note "pytest test_torch_gpu.py: rc $rc — $(tail -n 1 "$T/pytest_gpu.log")"
  local files=()
  for f in tests/python/test_torch_*.py; do [[ $f == */test_torch_gpu.py ]] || files+=("$f"); done
  rc=0
  timeout "$(left 120)" python3 -m pytest -q -rs -p no:cacheprovider "${xdist[@]}" "${files[@]}" >"$T/pytest_suite.log" 2>&1 ||
    rc=$?
  note "pytest suite (cpu + cuda): rc $rc — $(tail -n 1 "$T/pytest_suite.log")"
  local ops=()
  if [[ -x $tb/bin/flashport_bench_ops ]]; then ops=(--bench-ops "$tb/bin/flashport_bench_ops")
  elif [[ -x $BUILD/bin/flashport_bench_ops ]]; then ops=(--bench-ops "$BUILD/bin/flashport_bench_ops"); fi
  rc=0
  timeout "$(left 30)" python3 bench/gpu/torch_peers.py --out "$T" "${ops[@]}" >"$T/torch_peers.log" 2>&1 || rc=$?
  note "torch_peers.py: rc $rc (torch_peers.md; 124: stopped at the stage's deadline)"
  if [[ -f python/flashport/bench.py ]]; then
    rc=0
    timeout "$(left 0)" python3 -m flashport.bench sd --device cuda >"$T/bench_sd.log" 2>&1 || rc=$?
    note "flashport.bench sd: rc $rc — $(tail -n 1 "$T/bench_sd.log")"
  else
    note "flashport.bench sd: python/flashport/bench.py not in this tree"
  fi
  note "torch stage: $(( $(date +%s) - start )) s"
  cat "$T/torch_peers.md" 2>/dev/null | head -n 40 || true
}

# Fallback when CMake's Torch config fails on pip torch: build `flashport` (CUDA, no torch) with CMake and
# link python/csrc by hand with torch.utils.cpp_extension's include paths and torch's libraries.
torch_manual_link() {
  local T=$1 tb=$2-lib cuda_root=$3 lib=$4
  {
    echo "== manual link: the flashport library without torch"
    cmake -S . -B "$tb" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHPORT_CUDA=ON -DFLASHPORT_TESTS=OFF \
      -DFLASHPORT_WERROR=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
      -DCMAKE_PREFIX_PATH="${CMAKE_PREFIX_PATH:-}" -DCUDAToolkit_ROOT="$cuda_root" &&
      cmake --build "$tb" --parallel "$JOBS" --target flashport || return 1
    local flags a
    flags=$(python3 - <<'PY'
import torch, torch.utils.cpp_extension as ce, os
try:
    inc = ce.include_paths(device_type="cuda")
except TypeError:
    inc = ce.include_paths(cuda=True)
libdir = os.path.join(os.path.dirname(torch.__file__), "lib")
print(" ".join(f"-isystem {p}" for p in inc),
      f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}", f"-L{libdir} -Wl,-rpath,{libdir}")
PY
) || return 1
    a=$(find "$tb" -name libflashport.a | head -n 1)
    echo "flags: $flags; library: $a"
    # shellcheck disable=SC2086
    g++ -std=c++20 -O2 -fPIC -shared -fvisibility=hidden -DFLASHPORT_TORCH_GPU -Iinclude -isystem "$cuda_root/include" \
      $flags python/csrc/*.cpp "$a" -ltorch -ltorch_cpu -ltorch_cuda -lc10 -lc10_cuda -L"$cuda_root/lib64" -lcudart \
      -lcublas -fopenmp -Wl,--exclude-libs,ALL -o "$lib"
  } >>"$T/build.log" 2>&1
}

case "${1:-}" in
  fetch-deps) fetch_deps ;;
  build) build ;;
  test) test_stage ;;
  sanitize) shift; sanitize "$@" ;;
  bench) shift; bench "$@" ;;
  decode) decode ;;
  varlen) varlen ;;
  decode-bench) decode_bench ;;
  ops-bench) shift; ops_bench "$@" ;;
  tune) shift; tune "$@" ;;
  engine) shift; engine "$@" ;;
  engine-test) engine_test ;;
  engine-profile) engine_profile ;;
  engine-diagnose) engine_diagnose ;;
  before-tree) before_tree "${2:?usage: h200.sh before-tree REV}" ;;
  compare) shift; compare "$@" ;;
  torch) torch_stage ;;
  serve) shift; serve_stage "$@" ;;
  serve-check) serve_check ;;
  issue16-check) issue16_check ;;
  prefill-ab) prefill_ab ;;
  decode-ab) decode_ab ;;
  decode-trees) decode_trees ;;
  norm-ab) norm_ab ;;
  batch-gemv) batch_gemv ;;
  batch-check) batch_check ;;
  wgmma-check) wgmma_check ;;
  wgmma-auto) wgmma_auto ;;
  wgmma-default) wgmma_default ;;
  tma-check) tma_check ;;
  attention-table) attention_table ;;
  ttft-4096) ttft_4096 ;;
  prefill-profile) prefill_profile ;;
  order-check) order_check ;;
  decode-table) decode_table ;;
  memory-check) memory_check ;;
  tma-engine) tma_engine ;;
  tool-goldens) tool_goldens ;;
  varlen-split) varlen_split ;;
  tc-diag) tc_diag ;;
  portable) shift; portable_stage "$@" ;;
  memory-tools) memory_tools ;;
  all) build; test_stage || true; bench ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2 ;;
esac
