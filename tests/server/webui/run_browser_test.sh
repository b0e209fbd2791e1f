#!/usr/bin/env bash
# The chat page in a real browser: `ferry serve` on the bundled model, headless Chromium driven
# over the DevTools protocol (browser_test.mjs). Exits 77 (ctest: skipped) without chromium or
# a Node.js with WebSocket support.  usage: run_browser_test.sh FERRY_BINARY ARTIFACT_DIR
set -euo pipefail
ferry="$1"
artifacts="$2"
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  echo "SKIP: chromium is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi
if ! command -v node >/dev/null || ! node --experimental-websocket -e 'new WebSocket("ws://127.0.0.1:1").onerror = () => {}' 2>/dev/null; then
  echo "SKIP: node with WebSocket support (Node >= 20.10) is needed to drive the browser"
  exit 77
fi
mkdir -p "$artifacts"
exec node --experimental-websocket --no-warnings "$(dirname "$0")/browser_test.mjs" "$ferry" "$chromium" "$artifacts"
