#!/usr/bin/env bash
# The prefix-cache tier figure of docs/benchmarks.md: `ferry bench serve --multi-turn` against
# `ferry serve` with a KV pool too small for every conversation's history, first without and
# then with the RAM tier, one after the other in the same run, same workload.
# usage: scripts/bench-prefix-tiers.sh MODEL [CONVS TURNS INPUT_LEN OUTPUT_LEN KV_MEMORY RAM CONCURRENCY THREADS]
set -euo pipefail
model=$1 convs=${2:-8} turns=${3:-6} in_len=${4:-32} out_len=${5:-16} kv=${6:-24M} ram=${7:-512M}
conc=${8:-2} threads=${9:-2}
ferry="$(cd "$(dirname "$0")/.." && pwd)/build/bin/ferry"
log=$(mktemp)
for tier in none ram; do
  extra=()
  [ "$tier" = ram ] && extra=(--prefix-cache-ram "$ram")
  "$ferry" serve -m "$model" --port 0 --kv-cache-memory "$kv" --max-num-seqs "$conc" -t "$threads" \
    "${extra[@]}" </dev/null >"$log" 2>&1 &
  pid=$!
  port=""
  for _ in $(seq 1 300); do
    port=$(grep -o '127.0.0.1:[0-9]*' "$log" | cut -d: -f2 || true)
    [ -n "$port" ] && break
    sleep 0.2
  done
  [ -n "$port" ] || { cat "$log" >&2; kill "$pid"; exit 1; }
  echo "tier=$tier $("$ferry" bench serve --url "http://127.0.0.1:$port" --num-requests "$convs" \
    --multi-turn "$turns" --max-concurrency "$conc" --input-len "$in_len" --output-len "$out_len" --seed 0 --json)"
  echo "tier=$tier metrics: $(curl -s "http://127.0.0.1:$port/metrics" | grep -E '^ferry:(prefix_cache|num_preemptions)' | tr '\n' ' ')"
  kill -TERM "$pid"
  wait "$pid" || true
done
rm -f "$log"
