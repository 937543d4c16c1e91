#!/usr/bin/env bash
# Builds the libFuzzer targets (preset `fuzz`: clang-14, ASan + UBSan) and runs each for a while:
#   1. every committed seed (tests/fuzz/corpus/TARGET) is run once; a seed that fails is a finding;
#   2. libFuzzer mutates from the seeds and the inputs it kept before (build/fuzz/corpus/TARGET) for
#      the rest of the time, restarting after each finding so that one bug does not end the run.
# Then prints per target: seeds, execs, exec/s, coverage (libFuzzer's cov: edges, ft: features),
# corpus size and findings, with each finding's input (kept in build/fuzz/findings/TARGET/), its
# sanitizer or invariant line and the first flashport frame of its stack. Exits 1 on any finding.
#
# Usage: scripts/fuzz.sh [--jobs N] [TARGET|all] [SECONDS]      (defaults: all, 60 s per target)
#   CI runs `scripts/fuzz.sh --jobs 2 all 10` (scripts/test.sh); a long run is e.g. `all 600`.
#   Inputs go up to 1 MiB (-max_len), room for 100 000-deep JSON; one input may take 10 s.
#   Replay one input: build/fuzz/fuzz/fuzz_TARGET FILE
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

jobs=1
if [[ "${1:-}" == "--jobs" ]]; then jobs=$2; shift 2; fi
which=${1:-all}
seconds=${2:-60}
targets=()
for dir in tests/fuzz/corpus/*/; do targets+=("$(basename "$dir")"); done
if [[ "$which" != all ]]; then
  [[ -d "tests/fuzz/corpus/$which" ]] || { echo "fuzz: no target '$which' (targets: ${targets[*]})" >&2; exit 2; }
  targets=("$which")
fi

command -v clang++-14 >/dev/null ||
  { echo "fuzz: clang++-14 not found; install it with scripts/install-deps.sh --fuzz" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { cmake --preset fuzz && cmake --build --preset fuzz -j "$(nproc)"; } >"$log" 2>&1; then
  tail -n 40 "$log"
  echo "fuzz: building the fuzz preset failed" >&2
  exit 1
fi

out="$root/build/fuzz"
# Slow inputs (the 200 KB deep seeds) get less of the time, or they would take most of it.
libfuzzer_flags=(-max_len=1048576 -timeout=10 -rss_limit_mb=4096 -entropic_scale_per_exec_time=1 -print_final_stats=1)

# The sanitizer's or invariant's one line, and the first frame in flashport's own code.
describe() {
  local what where
  # (Template arguments are dropped: nlohmann's types alone fill a line.)
  what=$(grep -m1 -A1 -E "^SUMMARY: |runtime error:|fuzz: invariant broken|terminate called|ERROR: libFuzzer" "$1" |
    grep -v "^==" | sed -E ':a; s/<[^<>]*>//g; ta' | cut -c1-200 | paste -sd '\n' | sed '2,$s/^ */      /' || true)
  where=$(grep -m1 -E "^ +#[0-9]+ .* (/[^ ]*)?/(src|tests/fuzz)/" "$1" |
    sed -E "s/^ +#[0-9]+ 0x[0-9a-f]+ in //; s#[^ ]*/\.\./##; s#$root/##; :a; s/<[^<>]*>//g; ta" | cut -c1-200 || true)
  echo "      ${what:-(no sanitizer line; see the log)}"
  echo "      at ${where:-(no flashport frame in the stack: deep recursion hides it)}"
}

# One target; writes its summary line to $out/results/TARGET and finding details to .../TARGET.findings.
run_target() {
  local t=$1 bin="$out/fuzz/fuzz_$1" work="$out/corpus/$1" findings="$out/findings/$1"
  local seeds="$out/seeds/$1" tlog="$out/logs/$1.log"
  mkdir -p "$work" "$findings" "$out/logs" "$out/results" "$out/seeds"
  rm -rf "$seeds" && cp -r "tests/fuzz/corpus/$t" "$seeds"
  : >"$out/results/$t.findings"
  local n_seeds bad_seeds=0 execs=0 cov=0 ft=0 found=0 start left
  n_seeds=$(find "$seeds" -type f | wc -l)

  # 1. Seeds: a pass over the folder stops at the first failing input; drop it and go on.
  while ! "$bin" -runs=0 "${libfuzzer_flags[@]}" -artifact_prefix="$findings/" "$seeds" >"$tlog" 2>&1; do
    local artifact seed
    artifact=$(grep -o "Test unit written to .*" "$tlog" | tail -n1 | sed 's/Test unit written to //')
    [[ -n "$artifact" && -f "$artifact" ]] || { echo "      seed pass failed without an artifact:" && tail -n 5 "$tlog"; } >>"$out/results/$t.findings"
    # libFuzzer names an artifact after the SHA-1 of the input.
    seed=$(sha1sum "$seeds"/* | awk -v sha="${artifact##*-}" '$1 == sha && !n++ { print $2 }')
    [[ -n "$seed" ]] || break
    { echo "  seed tests/fuzz/corpus/$t/$(basename "$seed") -> ${artifact#"$root"/}"; describe "$tlog"; } >>"$out/results/$t.findings"
    cp "$tlog" "$artifact.log"
    rm -f "$seed"
    bad_seeds=$((bad_seeds + 1))
  done

  # 2. Fuzzing until the time is up, restarting after each finding.
  start=$(date +%s)
  while left=$((seconds - ($(date +%s) - start))); ((left > 0)); do
    local rc=0
    "$bin" "${libfuzzer_flags[@]}" -max_total_time="$left" -artifact_prefix="$findings/" "$work" "$seeds" \
      >"$tlog" 2>&1 || rc=$?
    execs=$((execs + $(grep -m1 -oP "stat::number_of_executed_units: *\K[0-9]+" "$tlog" || echo 0)))
    read -r cov ft < <(grep -oP "^#[0-9]+.*cov: \K[0-9]+ ft: [0-9]+" "$tlog" | tail -n1 | sed 's/ ft://') ||
      true
    ((rc == 0)) && break
    local artifact
    artifact=$(grep -o "Test unit written to .*" "$tlog" | tail -n1 | sed 's/Test unit written to //')
    [[ -n "$artifact" ]] || { echo "  libFuzzer exited $rc without an artifact:" && tail -n 5 "$tlog"; } >>"$out/results/$t.findings"
    [[ -n "$artifact" ]] || break
    { echo "  ${artifact#"$root"/}"; describe "$tlog"; } >>"$out/results/$t.findings"
    cp "$tlog" "$artifact.log"
    found=$((found + 1))
    ((found < 20)) || { echo "  (stopped after 20 findings)" >>"$out/results/$t.findings"; break; }
  done
  local took=$(( $(date +%s) - start ))
  printf "%-20s %6d %10d %9d %8s %8s %8d %9d\n" "$t" "$n_seeds" "$bad_seeds" "$execs" \
    "$((execs / (took > 0 ? took : 1)))" "${cov:-?}" "${ft:-?}" "$found" >"$out/results/$t"
  echo "   $t: done"
}

echo "== fuzz: ${targets[*]}; $seconds s each, $jobs at a time; inputs up to 1 MiB"
rm -f "$out"/results/*
pids=()
for t in "${targets[@]}"; do
  run_target "$t" &
  pids+=($!)
  if ((${#pids[@]} >= jobs)); then wait "${pids[0]}" || true; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || true; done  # a target that fails to run has no result line

printf "%-20s %6s %10s %9s %8s %8s %8s %9s\n" target seeds bad-seeds execs exec/s cov ft findings
status=0
for t in "${targets[@]}"; do
  cat "$out/results/$t" 2>/dev/null || { echo "$t: no result (the run itself failed)"; status=1; }
done
for t in "${targets[@]}"; do
  if [[ -s "$out/results/$t.findings" ]]; then
    echo "-- $t findings (inputs and logs in build/fuzz/findings/$t/):"
    cat "$out/results/$t.findings"
    status=1
  fi
done
echo "fuzz: $([[ $status == 0 ]] && echo "no findings" || echo "FINDINGS: see above")"
exit $status
