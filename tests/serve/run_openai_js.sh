#!/usr/bin/env bash
# Runs test_openai.mjs, or exits 77 (ctest's SKIP_RETURN_CODE) saying what is missing: node, or the
# npm packages of package-lock.json (scripts/install-deps.sh installs both: nodejs/npm from Debian,
# then `npm ci` here).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v node >/dev/null; then
  echo "SKIP: node is not installed (apt-get install nodejs npm, or scripts/install-deps.sh)"
  exit 77
fi
if [[ ! -f "$here/node_modules/openai/package.json" ]]; then
  echo "SKIP: the npm package 'openai' is not installed in tests/serve (run: npm ci --prefix tests/serve, or scripts/install-deps.sh)"
  exit 77
fi
exec node "$here/test_openai.mjs"
