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
  libgtest-dev libgmock-dev  # unit tests
  libbenchmark-dev      # kernel microbenchmarks
  clang libclang-rt-14-dev   # libFuzzer + ASan/UBSan for the parser fuzz targets
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
