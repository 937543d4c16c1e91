#!/usr/bin/env bash
# Installs the Debian 12 packages flashport needs to build, test and benchmark. Safe to re-run:
# it only calls apt-get when something is missing. Extras on request:
#   --hip    Debian's HIP compiler (the hip preset);
#   --fuzz   clang-14 with libFuzzer and its OpenMP (the fuzz preset; scripts/test.sh asks for it).
set -euo pipefail

packages=(
  build-essential cmake          # toolchain (g++ 12, CMake >= 3.25)
  libopenblas0-pthread           # the naive CPU baseline's GEMMs (loaded at run time)
  nlohmann-json3-dev             # JSON
  libcli11-dev                   # command line
  libcpp-httplib-dev pkg-config  # `flashport serve`: HTTP server (found through pkg-config)
  libgtest-dev                   # tests
  librsvg2-bin                   # rsvg-convert: PNG plots (SVG needs nothing)
  libpcre2-dev libutf8proc-dev   # tokenizer: pre-tokenizer regex (UTF+UCP), NFC normalisation
  libtbb-dev                     # ROCm's HIP CPU Runtime: the GPU kernels at wave64 (scripts/gpu/wave64.sh)
  # The PyTorch package (python/flashport): Debian's torch 1.13 (CPU) for /usr/bin/python3, its CMake
  # files and headers to build the extension against, and pytest for its suite (tests/python).
  python3-torch libtorch-dev python3-pytest
)
# `flashport serve`'s test with the official OpenAI JavaScript client: Debian's node and npm, unless a
# node is already installed some other way (NodeSource's nodejs bundles npm and conflicts with Debian's).
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
packages+=(chromium)             # the serve page's browser test (Playwright drives it; tests/serve)
for extra in "$@"; do
  case "$extra" in
    --hip) packages+=(hipcc libamdhip64-dev rocm-device-libs) ;;
    --fuzz) packages+=(clang-14 libclang-rt-14-dev libomp-14-dev) ;;
    *) echo "usage: scripts/install-deps.sh [--hip] [--fuzz]" >&2; exit 2 ;;
  esac
done

# The npm packages of `flashport serve`'s JavaScript test (tests/serve/package-lock.json: the official
# `openai` client and playwright-core), installed beside it with `npm ci`, which installs exactly the locked versions.
npm_packages() {
  local dir="tests/serve"
  [[ -f "$dir/node_modules/openai/package.json" && -f "$dir/node_modules/playwright-core/package.json" ]] && return 0
  if ! command -v npm >/dev/null; then
    echo "install-deps: npm is missing, so tests/serve's OpenAI client test will be skipped"
    return 0
  fi
  echo "install-deps: npm ci in $dir (the openai client for the serve tests)"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) ||
    echo "install-deps: npm ci failed (no registry access?); the OpenAI client test will be skipped" >&2
}
cd "$(dirname "$0")/.."

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all packages present"
  npm_packages
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo; missing: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
npm_packages
