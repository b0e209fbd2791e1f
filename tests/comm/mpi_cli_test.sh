#!/usr/bin/env bash
# The CLI under mpirun: `ferry run --tensor-parallel 2` prints what one process prints (greedy and
# top-k sampled); a layout that does not match -np fails on every rank; a killed or stopped rank
# ends the job with an error within the --comm-timeout bound instead of hanging.
# Usage: mpi_cli_test.sh MPIEXEC FERRY SOURCE_DIR CASE   (CASE: equal | mismatch | killed | stopped)
# The assets: $FERRY_ASSETS, else SOURCE_DIR/../shared/assets (as the C++ tests find them).
set -uo pipefail
mpiexec=$1 ferry=$2 assets=${FERRY_ASSETS:-$3/../shared/assets} case=$4
model=$assets/stories260K.gguf
[ -f "$model" ] || { echo "skipped: $model not found (set FERRY_ASSETS)"; exit 0; }
flags=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
mpirun() { "$mpiexec" "${flags[@]}" "$@"; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# fail, descendants, rank_pid
. "$(dirname "${BASH_SOURCE[0]}")/mpi_test_lib.sh"

# A long split job (perplexity over a big text) with one rank hit by signal $1 after it started.
hit_rank() {
  local sig=$1
  mpirun -np 2 "$ferry" ppl -m "$model" -f "$assets/eval-text/wiki.test.raw" -c 128 -t 1 --tensor-parallel 2 \
    --comm-timeout 3 >"$out/stdout" 2>"$out/stderr" &
  local job=$! pid="" start=$SECONDS
  for _ in $(seq 100); do
    pid=$(rank_pid 1 "$job")
    [ -n "$pid" ] && grep -q "rank 0 of 2" "$out/stderr" && break
    sleep 0.1
  done
  [ -n "$pid" ] || fail "rank 1 did not start"
  sleep 1  # inside the run
  kill "-$sig" "$pid"
  wait "$job"
  local rc=$? took=$((SECONDS - start))
  [ "$rc" -ne 0 ] || fail "the job exited 0 after SIG$sig to rank 1"
  [ "$took" -le 30 ] || fail "the job took ${took}s to end after SIG$sig to rank 1"
  echo "SIG$sig to rank 1: exit $rc after ${took}s"; grep -v "running ppl" "$out/stderr" | tail -12
}

case $case in
  equal)
    # Top-k sampled with a seed: the split head gathers each rank's top 40 only (greedy below:
    # its argmax); the text must still be the one process's.
    args=(run -m "$model" -p "Once upon a time" -n 60 --temp 0.8 --top-k 40 --seed 7 -t 1)
    "$ferry" "${args[@]}" >"$out/one" 2>/dev/null || fail "one process failed (sampled)"
    mpirun -np 2 "$ferry" "${args[@]}" --tensor-parallel 2 >"$out/tp2" 2>/dev/null || fail "tp2 failed (sampled)"
    [ "$(cat "$out/one")" = "$(cat "$out/tp2")" ] || fail "tensor-parallel sampled output differs"
    args=(run -m "$model" -p "Once upon a time" -n 60 --temp 0 -t 1)
    "$ferry" "${args[@]}" >"$out/one" 2>/dev/null || fail "one process failed"
    mpirun -np 2 "$ferry" "${args[@]}" --tensor-parallel 2 >"$out/tp2" 2>"$out/tp2.err" || fail "tp2 failed"
    # mpirun ends forwarded output with a newline; the text itself must be the same.
    [ "$(cat "$out/one")" = "$(cat "$out/tp2")" ] || fail "tensor-parallel output differs"
    [ "$(grep -c 'weights .* MiB, KV cache' "$out/tp2.err")" -eq 2 ] || fail "per-rank memory not printed by both"
    [ -s "$out/one" ] || fail "no text"
    echo "equal: $(cat "$out/one")"
    ;;
  mismatch)
    mpirun -np 2 "$ferry" run -m "$model" -p hi -n 2 --tensor-parallel 3 >"$out/stdout" 2>"$out/stderr" &&
      fail "a mismatched layout exited 0"
    for r in 0 1; do
      grep -q "rank $r of 2: --tensor-parallel 3 x --pipeline-parallel 1 = 3 ranks, but the job has 2" \
        "$out/stderr" || fail "rank $r did not say why"
    done
    echo "mismatch: refused on both ranks"
    ;;
  killed)
    hit_rank KILL  # Open MPI's runtime sees the death itself and ends the job, naming the rank
    grep -q "process rank 1 .* exited on signal 9" "$out/stderr" || fail "mpirun did not name the dead rank"
    ;;
  stopped)  # the peer is alive but silent: only the deadline can end the wait
    hit_rank STOP
    grep -q "ferry: rank 0 of 2: .* did not complete within 3 s (--comm-timeout)" "$out/stderr" ||
      fail "rank 0 did not report the timeout"
    ;;
  *) fail "unknown case $case" ;;
esac
