# Helpers the mpirun test scripts source (mpi_cli_test.sh, mpi_serve_test.sh). Needs $out (a
# scratch folder whose files fail() prints).

fail() { echo "FAIL: $*"; for f in "$out"/*; do echo "--- $f"; tail -20 "$f"; done; exit 1; }

# Every process below pid $1.
descendants() {
  local c
  for c in $(pgrep -P "$1"); do
    echo "$c"
    descendants "$c"
  done
}
# The pid of world rank $1 among the processes below pid $2 (Open MPI puts the rank in the environment).
rank_pid() {
  for p in $(descendants "$2"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return; }
  done
}
