#!/usr/bin/env bash
# Runs one of tests/serve's node tests, or exits 77 (ctest's SKIP_RETURN_CODE) saying what is missing:
# node, the npm package the test needs (package-lock.json; `npm ci` here, which scripts/install-deps.sh
# runs), or for the browser test (playwright-core) chromium (apt-get install chromium; FP_CHROMIUM
# overrides the path).
# Usage: run_node.sh TEST.mjs NPM_PACKAGE     e.g. run_node.sh test_openai.mjs openai
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
test=$1 package=$2
if ! command -v node >/dev/null; then
  echo "SKIP: node is not installed (apt-get install nodejs npm, or scripts/install-deps.sh)"
  exit 77
fi
if [[ ! -f "$here/node_modules/$package/package.json" ]]; then
  echo "SKIP: the npm package '$package' is not installed in tests/serve (run: npm ci --prefix tests/serve, or scripts/install-deps.sh)"
  exit 77
fi
if [[ $package == playwright-core ]]; then
  chromium="${FP_CHROMIUM:-/usr/lib/chromium/chromium}"
  if [[ ! -x "$chromium" ]]; then
    echo "SKIP: no chromium at $chromium (apt-get install chromium, or set FP_CHROMIUM)"
    exit 77
  fi
fi
exec node "$here/$test"
