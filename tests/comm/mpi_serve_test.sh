#!/usr/bin/env bash
# The serving engine under mpirun with --tensor-parallel 2 (rank 0 serves, rank 1 follows):
#   serve:      a completion over HTTP equals one process's (with the prefix cache's RAM and disk
#               tiers on rank 0 over two tensor ranks), beam search is refused with a 400,
#               and SIGTERM to mpirun drains rank 0, which stops the follower (no rank fails);
#               two --pipeline-parallel stages serve the same completion;
#   stopped:    a follower stopped while the server is idle ends the job within --comm-timeout
#               with rank 0's error (its heartbeat is not answered), never a hang;
#   throughput: `ferry bench throughput` gives the same token counts and steps as one process,
#     over two tensor ranks and over two pipeline stages (with micro-batches and their bubble).
# Usage: mpi_serve_test.sh MPIEXEC FERRY SOURCE_DIR CASE
set -uo pipefail
mpiexec=$1 ferry=$2 assets=${FERRY_ASSETS:-$3/../shared/assets} case=$4
model=$assets/stories260K.gguf
[ -f "$model" ] || { echo "skipped: $model not found (set FERRY_ASSETS)"; exit 0; }
command -v curl >/dev/null || { echo "skipped: no curl"; exit 0; }
flags=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
out=$(mktemp -d)
job=""
trap '[ -n "$job" ] && kill -KILL "$job" 2>/dev/null; rm -rf "$out"' EXIT
# fail, descendants, rank_pid
. "$(dirname "${BASH_SOURCE[0]}")/mpi_test_lib.sh"

# Starts a server (the command in "$@", in the background as $job) and sets $port once it listens.
start_server() {
  local log=$1
  shift
  "$@" >"$out/$log.out" 2>"$out/$log.err" &
  job=$!
  port=""
  for _ in $(seq 150); do
    port=$(grep -o 'on http://127.0.0.1:[0-9]*' "$out/$log.err" | grep -o '[0-9]*$')
    [ -n "$port" ] && return
    kill -0 "$job" 2>/dev/null || fail "$log exited before serving"
    sleep 0.1
  done
  fail "$log did not start serving"
}
complete() {  # prints the completion's text for $1 on $port
  curl -s -X POST "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"prompt\": \"$1\", \"max_tokens\": 40, \"temperature\": 0}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])'
}
serve=(serve -m "$model" -t 1 --port 0 --no-webui --kv-cache-memory 16M)
split=("$mpiexec" "${flags[@]}" -np 2 "$ferry" "${serve[@]}" --tensor-parallel 2)

case $case in
  serve)
    start_server one "$ferry" "${serve[@]}"
    want=$(complete "Once upon a time") || fail "one process: no completion"
    kill -TERM "$job"; wait "$job"; job=""
    # With the prefix cache's tiers on rank 0: the disk tier's start-up probe runs on both ranks.
    start_server tp2 "${split[@]}" --comm-timeout 5 --prefix-cache-ram 8M --prefix-cache-dir "$out/tiers"
    got=$(complete "Once upon a time") || fail "tp2: no completion"
    [ -n "$want" ] && [ "$got" = "$want" ] || fail "tp2 completion '$got' differs from one process's '$want'"
    grep -q "prefix cache disk tier .*: a block reads back in" "$out/tp2.err" || fail "tp2: the disk tier was not priced"
    code=$(curl -s -o "$out/beam.json" -w '%{http_code}' -X POST "http://127.0.0.1:$port/v1/completions" \
      -H 'Content-Type: application/json' -d '{"prompt": "hi", "max_tokens": 4, "use_beam_search": true, "n": 2}')
    [ "$code" = 400 ] && grep -q "split over ranks" "$out/beam.json" || fail "beam search: $code $(cat "$out/beam.json")"
    start=$SECONDS
    kill -TERM "$job"
    wait "$job"
    rc=$?
    job=""
    # mpirun itself exits 1 when it was signalled, even when every rank exits 0; what must hold
    # is that rank 0 drained and stopped, and no rank failed or had to be killed.
    [ $((SECONDS - start)) -le 10 ] || fail "shutting down took $((SECONDS - start)) s"
    grep -q "SIGTERM: no new connections" "$out/tp2.err" && grep -q "ferry info: stopped" "$out/tp2.err" ||
      fail "rank 0 did not drain and stop"
    ! grep -q "ferry: rank [01] of 2: [^(]" "$out/tp2.err" || fail "a rank reported an error"
    ! grep -qi "exited on signal\|aborted" "$out/tp2.err" || fail "a rank was killed"
    # Two pipeline stages serve the same completion.
    start_server pp2 "$mpiexec" "${flags[@]}" -np 2 "$ferry" "${serve[@]}" --pipeline-parallel 2 --comm-timeout 5
    staged=$(complete "Once upon a time") || fail "pp2: no completion"
    [ "$staged" = "$want" ] || fail "pp2 completion '$staged' differs from one process's '$want'"
    kill -TERM "$job"; wait "$job"; job=""
    grep -q "ferry info: stopped" "$out/pp2.err" || fail "pp2: rank 0 did not stop"
    echo "serve: '$got' (tp2 and pp2); beam search refused; SIGTERM to mpirun: drained and stopped (mpirun exit $rc)"
    ;;
  stopped)
    start_server tp2 "${split[@]}" --comm-timeout 2
    pid=$(rank_pid 1 "$job")
    [ -n "$pid" ] || fail "no rank 1"
    start=$SECONDS
    kill -STOP "$pid"
    wait "$job"
    rc=$?
    job=""
    kill -KILL "$pid" 2>/dev/null
    took=$((SECONDS - start))
    [ "$rc" -ne 0 ] || fail "the job exited 0 with a stopped follower"
    [ "$took" -le 15 ] || fail "the job took ${took}s to end"
    grep -q "ferry: rank 0 of 2: .*did not complete within 2 s (--comm-timeout)" "$out/tp2.err" ||
      fail "rank 0 did not report the timeout"
    echo "stopped follower: exit $rc after ${took}s"
    ;;
  throughput)
    bench=(bench throughput -m "$model" -t 1 --num-prompts 12 --input-len 8:64 --output-len 4:24 --max-batch-tokens 48
      --kv-cache-memory 16M --json)
    "$ferry" "${bench[@]}" >"$out/one.json" 2>"$out/one.err" || fail "one process failed"
    "$mpiexec" "${flags[@]}" -np 2 "$ferry" "${bench[@]}" --tensor-parallel 2 >"$out/tp2.json" 2>"$out/tp2.err" ||
      fail "tp2 failed"
    pick='import json,sys; j=json.load(open(sys.argv[1])); print(j["output_tokens"], j["steps"], j["prefill_tokens_computed"])'
    a=$(python3 -c "$pick" "$out/one.json") && b=$(python3 -c "$pick" "$out/tp2.json") || fail "no JSON"
    [ "$a" = "$b" ] || fail "one process: $a, tp2: $b (output tokens, steps, prefill tokens)"
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["tensor_parallel"] == 2 and j["comm_s"] > 0 else 1)' \
      "$out/tp2.json" || fail "no communication figures"
    # Over two pipeline stages: the same work, with the steps' prompts cut into micro-batches.
    "$mpiexec" "${flags[@]}" -np 2 "$ferry" "${bench[@]}" --pipeline-parallel 2 --pipeline-micro-batch-tokens 8 \
      >"$out/pp2.json" 2>"$out/pp2.err" || fail "pp2 failed: $(tail -3 "$out/pp2.err")"
    c=$(python3 -c "$pick" "$out/pp2.json") || fail "no pp2 JSON"
    [ "$a" = "$c" ] || fail "one process: $a, pp2: $c (output tokens, steps, prefill tokens)"
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["pipeline_parallel"] == 2 and j["micro_batches_per_step"] > 1 and 0 < j["pipeline_bubble_share"] < 1 else 1)' \
      "$out/pp2.json" || fail "no pipeline figures: $(cat "$out/pp2.json")"
    echo "throughput: $b; pp2: $c"
    ;;
  *) fail "unknown case $case" ;;
esac
