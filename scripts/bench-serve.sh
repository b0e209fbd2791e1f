#!/usr/bin/env bash
# The serving figure of docs/benchmarks.md: `ferry bench serve` against `ferry serve` with
# continuous and with static batching, one after the other in the same run, same workload.
# usage: scripts/bench-serve.sh MODEL RATE [NUM_REQUESTS INPUT_LEN OUTPUT_LEN MAX_NUM_SEQS]
set -euo pipefail
model=$1 rate=$2 num=${3:-48} in_len=${4:-64} out_len=${5:-32} seqs=${6:-16}
ferry="$(cd "$(dirname "$0")/.." && pwd)/build/bin/ferry"
log=$(mktemp)
for policy in continuous static; do
  "$ferry" serve -m "$model" --port 0 --kv-cache-memory 512M --max-num-seqs "$seqs" --policy "$policy" \
    </dev/null >"$log" 2>&1 &
  pid=$!
  port=""
  for _ in $(seq 1 300); do
    port=$(grep -o '127.0.0.1:[0-9]*' "$log" | cut -d: -f2 || true)
    [ -n "$port" ] && break
    sleep 0.2
  done
  [ -n "$port" ] || { cat "$log" >&2; kill "$pid"; exit 1; }
  echo "policy=$policy $("$ferry" bench serve --url "http://127.0.0.1:$port" --num-requests "$num" \
    --request-rate "$rate" --input-len "$in_len" --output-len "$out_len" --seed 0 --json)"
  kill -TERM "$pid"
  wait "$pid"
done
rm -f "$log"
