#!/usr/bin/env bash
# Configures and builds Ferry (Release) into ./build; the binary is build/bin/ferry.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@" >/dev/null
cmake --build build -j "$(nproc)"
