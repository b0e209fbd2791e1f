#!/usr/bin/env bash
# Sets up, builds and generates text.
#   scripts/run.sh                       the bundled stories260K model (models/stories260K/) tells a
#                                        short story, then `ferry serve` runs on it (chat page and
#                                        OpenAI API) until Ctrl-C
#   scripts/run.sh MODEL [PROMPT] [extra ferry run flags...]   generate from your own model
# The server part needs a terminal on stdin (or RUN_SERVE=1), and never runs with CI=true, so a
# non-interactive caller is never left waiting. PORT (default 8080) picks its port.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
MODEL="${1:-}"
PROMPT="${2:-Once upon a time}"
shift $(( $# > 2 ? 2 : $# ))
if [ -n "$MODEL" ]; then
  ./build/bin/ferry run -m "$MODEL" -p "$PROMPT" -n 64 --temp 0.8 --seed 42 "$@"
  echo
  exit 0
fi

./build/bin/ferry run -p "$PROMPT" -n 200 --temp 0.8 --seed 42
echo
if [ "${CI:-}" = "true" ] || { [ ! -t 0 ] && [ "${RUN_SERVE:-}" != 1 ]; }; then
  echo "(not starting the server: no terminal on stdin; RUN_SERVE=1 starts it anyway)"
  exit 0
fi
PORT="${PORT:-8080}"
echo
echo "Starting the server on the same model. Chat page: http://127.0.0.1:$PORT/"
echo "API:  curl -s http://127.0.0.1:$PORT/v1/completions -H 'Content-Type: application/json' \\"
echo "        -d '{\"prompt\": \"Once upon a time\", \"max_tokens\": 64}'"
echo "Ctrl-C stops it."
exec ./build/bin/ferry serve --port "$PORT"
