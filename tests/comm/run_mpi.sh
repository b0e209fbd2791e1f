#!/usr/bin/env bash
# ctest's launcher for multi-rank tests: mpirun -np N --oversubscribe (+ --allow-run-as-root
# when run as root, which Open MPI refuses otherwise), then the command.
# Usage: run_mpi.sh MPIEXEC N command args...
set -euo pipefail
mpiexec=$1 np=$2
shift 2
flags=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
exec "$mpiexec" -np "$np" "${flags[@]}" "$@"
