#!/bin/bash
# Nonblocking collectives (call/nonblocking.h): nonblocking_check's rounds
# of MPI_Iallreduce, MPI_Ireduce_scatter_block, MPI_Ireduce_scatter and
# MPI_Iallgather, against the MPI's own blocking calls and a local
# reference, completed with every completion call beside MPI's own
# requests, on two communicators started in opposite orders on odd and
# even ranks; many in flight; threads.  Every call may take the ring
# (threshold 0, host buffers on); the program counts those that did.
set -u
. "$(dirname "$0")/../lib.sh"
prog="$NEXAR_BUILDDIR/test/mpi/nonblocking_check"
new_log
export NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=0 NEXAR_STATS=1

run() {  # run NP [VAR=VALUE...] -- ARGS...
    local np=$1; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    echo "== $np ranks ${envs[*]:-} $*"
    env "${envs[@]}" bash -c 'source "$0"; nexar_mpirun "$@"' "$(dirname "$0")/../lib.sh" "$np" "$prog" "$@" \
        >"$log" 2>&1
    local rc=$?
    grep -av '^nexar: rank' "$log" | tail -n 12
    [ $rc = 0 ] || fail "nonblocking_check at $np ranks exited with $rc"
    [ "$(grep -ac '^nonblocking_check: rank [0-9]*: checks=[1-9][0-9]* errors=0$' "$log")" = "$np" ] ||
        fail "not every rank reported its checks without errors"
}

run 2 -- --rounds 20 --seed 1 --idle 10
check_stats "$log" 2 100
grep -a "idle 10 s: the progress thread used" "$log"
check_bytes "$log" shm_bytes nonzero
run 3 -- --rounds 10 --seed 2
check_stats "$log" 3 80
# The UCX ring (ranks on different nodes take it).
run 2 NEXAR_SHM=0 -- --rounds 10 --seed 3
check_bytes "$log" ucx_bytes nonzero; check_bytes "$log" shm_bytes zero
# Two threads, each with communicators of its own, at once.
run 2 -- --rounds 10 --seed 4 --threads
check_stats "$log" 2 40
# No progress thread: the calls move only inside MPI calls.
run 2 NEXAR_PROGRESS=calls -- --rounds 10 --seed 6
check_stats "$log" 2 40
# Off: every nonblocking call passes through, with the same results.
run 2 NEXAR_NONBLOCKING=0 -- --rounds 10 --seed 5 --expect-ring 0
echo "PASS"
