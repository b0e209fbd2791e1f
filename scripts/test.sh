#!/usr/bin/env bash
# Sets up, builds and runs every test: each parser fuzz target for a bounded time, then the
# whole ctest suite (last, so its summary line closes the output).
# Tests that need ../shared/assets (or $FERRY_ASSETS) skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh -DFERRY_BUILD_BENCH=ON  # the microbenchmarks too, so they keep compiling
bash scripts/run-fuzzers.sh "${FERRY_FUZZ_SECONDS:-10}"
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900
