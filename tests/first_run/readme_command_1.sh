#!/usr/bin/env bash
# README command 1, verbatim, in a fresh clone: the first thing a new user runs must work.
#   - the command is the first ```sh block after "## Set up" in README.md;
#   - the clone is of this checkout's HEAD (committed work only), in a temporary folder with its own
#     build/ (ccache is used only where the environment asks for it, e.g. CMAKE_CXX_COMPILER_LAUNCHER);
#   - it runs within FLASHPORT_README_TIMEOUT seconds (default 1500);
#   - it must exit 0, write the --plot file as an SVG, and print bench attention's table (naive and
#     flash rows), then generated text and generate's figures line ("prompt N tokens | generated M").
# Exit status: 0 passed, 1 failed, 77 skipped (no git, or not a git checkout), for ctest.
# Usage: tests/first_run/readme_command_1.sh [SOURCE_DIR]
set -euo pipefail
src=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
limit=${FLASHPORT_README_TIMEOUT:-1500}
say() { echo "readme command 1: $*"; }

command -v git >/dev/null || { say "SKIPPED: git is not installed"; exit 77; }
git -C "$src" rev-parse --git-dir >/dev/null 2>&1 || { say "SKIPPED: $src is not a git checkout"; exit 77; }
head=$(git -C "$src" rev-parse HEAD)
cmd=$(awk '/^## Set up/ { s = 1 } s && /^```sh$/ { b = 1; next } b && /^```/ { exit } b' "$src/README.md")
[[ -n "$cmd" ]] || { say "FAILED: README.md has no \`\`\`sh block after '## Set up'"; exit 1; }
plot=$(grep -oP -- '--plot \K\S+' <<<"$cmd" | head -n1 || true)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/flashport-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# --shared: the clone borrows the objects, so HEAD is there even when no branch points at it.
git clone -q --shared --no-checkout "$src" "$tmp/flashport"
git -C "$tmp/flashport" checkout -q --detach "$head"
if [[ -n $(git -C "$src" status --porcelain --untracked-files=no) ]]; then
  say "note: $src has uncommitted changes, which the clone does not hold"
fi

say "running in a fresh clone of ${head:0:12} (limit $limit s):"
echo "  \$ $cmd"
start=$(date +%s)
rc=0
(cd "$tmp/flashport" && timeout --kill-after=30 "$limit" bash -c "$cmd") >"$tmp/out.log" 2>&1 || rc=$?
took=$(( $(date +%s) - start ))
grep -E "^(install-deps|build): " "$tmp/out.log" | sed 's/^/  | /' || true

fails=()
if ((rc == 124 || rc == 137)); then fails+=("it did not finish within $limit s"); elif ((rc != 0)); then fails+=("exit status $rc"); fi
svg="$tmp/flashport/$plot"
if [[ -z "$plot" ]]; then
  fails+=("the command has no --plot FILE to check")
elif ! [[ -s "$svg" ]] || ! head -c 400 "$svg" | grep -q "<svg" || ! tail -c 200 "$svg" | grep -q "</svg>"; then
  fails+=("$plot is missing or not an SVG")
fi
row='+\S+ +[0-9]+ +[0-9.]+ '  # impl, kernel, seq, median ms...
rows=$(grep -cE "^(naive|flash) $row" "$tmp/out.log" || true)
grep -qE "^naive $row" "$tmp/out.log" && grep -qE "^flash $row" "$tmp/out.log" ||
  fails+=("bench attention printed no table with naive and flash rows")
figures=$(grep -m1 -E "prompt [0-9]+ tokens \| generated [0-9]+" "$tmp/out.log" || true)
[[ -n "$figures" ]] || fails+=("generate printed no figures line")
# Generated text: what follows bench's last table row, apart from the plot note and the figures.
text_lines=$(awk -v plot="$plot" '/^(naive|flash) / { seen = 1; n = 0; next }
  seen && NF && index($0, plot) == 0 && !/prompt [0-9]+ tokens \| generated/ && /[[:alpha:]]/ { n++ }
  END { print n + 0 }' "$tmp/out.log")
((text_lines > 0)) || fails+=("generate printed no text")

if ((${#fails[@]} == 0)); then
  say "PASSED in $took s: exit 0; $plot is an SVG ($(stat -c %s "$svg") bytes); bench attention printed" \
    "$rows table rows; generate printed $text_lines lines of text and: $figures"
  exit 0
fi
say "FAILED after $took s:"
printf '  - %s\n' "${fails[@]}"
echo "last 40 lines of its output:"
tail -n 40 "$tmp/out.log" | sed 's/^/  | /'
exit 1
