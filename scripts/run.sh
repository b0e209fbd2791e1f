#!/usr/bin/env bash
# Sets up, builds and generates text. With no model given, makes a small random-weight
# model with `ferry make-model` and generates from it.
#   scripts/run.sh [MODEL] [PROMPT] [extra ferry run flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
MODEL="${1:-}"
PROMPT="${2:-Once upon a time}"
shift $(( $# > 2 ? 2 : $# ))
if [ -z "$MODEL" ]; then
  MODEL=build/models/tiny-q8_0.gguf
  mkdir -p build/models
  [ -f "$MODEL" ] || ./build/bin/ferry make-model --preset tiny --type q8_0 -o "$MODEL"
  ./build/bin/ferry info -m "$MODEL"
fi
./build/bin/ferry run -m "$MODEL" -p "$PROMPT" -n 64 --temp 0.8 --seed 42 "$@"
echo
