#!/usr/bin/env bash
# Runs test_web.mjs (Playwright driving Debian's chromium), or exits 77 (ctest's SKIP_RETURN_CODE)
# saying what is missing: node, the npm package playwright-core (npm ci in tests/serve, which
# scripts/install-deps.sh runs), or chromium (apt-get install chromium; FP_CHROMIUM overrides the path).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
chromium="${FP_CHROMIUM:-/usr/lib/chromium/chromium}"
if ! command -v node >/dev/null; then
  echo "SKIP: node is not installed (apt-get install nodejs npm, or scripts/install-deps.sh)"
  exit 77
fi
if [[ ! -f "$here/node_modules/playwright-core/package.json" ]]; then
  echo "SKIP: the npm package 'playwright-core' is not installed in tests/serve (run: npm ci --prefix tests/serve)"
  exit 77
fi
if [[ ! -x "$chromium" ]]; then
  echo "SKIP: no chromium at $chromium (apt-get install chromium, or set FP_CHROMIUM)"
  exit 77
fi
exec node "$here/test_web.mjs"
