#!/usr/bin/env bash
# ctest entry for the OpenAI Node SDK test: skips (exit 77) with a reason when node or the
# npm packages are missing (install them with `npm ci` in this folder; scripts/install-deps.sh does).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed (the OpenAI Node SDK test needs Node >= 18)"; exit 77
fi
if [ ! -f "$here/node_modules/openai/package.json" ] || [ ! -f "$here/node_modules/@anthropic-ai/sdk/package.json" ]; then
  echo "SKIP: $here/node_modules is missing: run 'npm ci' there (scripts/install-deps.sh does)"; exit 77
fi
exec node "$here/sdk_test.mjs" "$1"
