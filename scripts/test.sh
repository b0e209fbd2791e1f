#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest), then each fuzz target for a bounded time.
# Tests that need ../shared/assets (or $FERRY_ASSETS) skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900
if [ -x scripts/run-fuzzers.sh ] || [ -f scripts/run-fuzzers.sh ]; then
  bash scripts/run-fuzzers.sh "${FERRY_FUZZ_SECONDS:-20}"
fi
