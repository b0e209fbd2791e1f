#!/usr/bin/env bash
# Installs Ferry's build and test dependencies from Debian 12's archive (idempotent).
set -euo pipefail
PKGS=(
  cmake ninja-build g++ pkg-config
  libfmt-dev            # formatting for Status messages and output
  nlohmann-json3-dev    # JSON: safetensors headers, config.json, tokenizer.json
  libcli11-dev          # the ferry command line
  libpcre2-dev          # PCRE2 regexes (Unicode properties, JIT) for byte-level BPE pre-tokenizers
  libcpp-httplib-dev    # HTTP server/client for `ferry serve` and `ferry bench serve`
  libxxhash-dev         # checksums of the prefix cache's disk-tier block files
  openmpi-bin libopenmpi-dev  # optional MPI launch + library: tensor/pipeline parallel over processes
  libgtest-dev libgmock-dev  # unit tests
  libbenchmark-dev      # kernel microbenchmarks
  clang libclang-rt-14-dev   # libFuzzer + ASan/UBSan for the parser fuzz targets
  chromium              # headless browser for the chat-page test (tests/server/webui)
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The OpenAI Node SDK test (tests/server/node) needs its npm packages; optional without node.
root="$(cd "$(dirname "$0")/.." && pwd)"
if command -v npm >/dev/null 2>&1; then
  (cd "$root/tests/server/node" && npm ci --no-audit --no-fund --loglevel=error) ||
    echo "install-deps: npm ci in tests/server/node failed; the Node SDK test will be skipped"
else
  echo "install-deps: npm not found; the OpenAI Node SDK test (tests/server/node) will be skipped"
fi
