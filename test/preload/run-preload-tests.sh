#!/bin/bash
# Preload: a plain MPI program (built without nexar) run with
# LD_PRELOAD=libnexar_pmpi.so gets correct results and the ring runs; the same
# program with NEXAR_ENABLE=0 runs no ring call at all.
set -u
. "$(dirname "$0")/../lib.sh"
prog="$NEXAR_BUILDDIR/test/preload/plain_allreduce"
lib="$NEXAR_BUILDDIR/.libs/libnexar_pmpi.so"
[ -f "$lib" ] || fail "$lib not built"
[ -x "$prog" ] || fail "$prog not built"
# The library's own file name, not "nexar" anywhere: an MPI installed under
# a folder called nexar-something is no nexar.
deps=$(ldd "$prog") || fail "ldd $prog failed"
echo "$deps" | grep -aqE '^\s*libmpi' || fail "ldd shows no MPI library in $prog: $deps"
echo "$deps" | grep -aqE '^\s*libnexar_pmpi\.so' && fail "$prog must not be linked with nexar"
lib=$(preload_value "$lib")
new_log

run() {  # run NP EXPECT_MIN_RING VAR=VALUE... [-- MPMD ARGS: they replace "-np NP prog"]
    local np=$1 min=$2; shift 2
    local envs=() extra=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    [ $# -gt 0 ] && { shift; extra=("$@"); }
    echo "== $np ranks, LD_PRELOAD, ${envs[*]:-} ${extra[*]:-}"
    # The ranks get the library (mpirun -x), not mpirun or the shell.
    local cmd=("$np" --rank-env LD_PRELOAD="$lib" "$prog")
    [ ${#extra[@]} -gt 0 ] && cmd=("${extra[@]}")  # MPMD: the caller passes --rank-env LD_PRELOAD per context
    env "${envs[@]}" NEXAR_STATS=1 bash -c 'source "$0"; nexar_mpirun "$@"' \
        "$(dirname "$0")/../lib.sh" "${cmd[@]}" >"$log" 2>&1
    local rc=$?
    cat "$log"
    [ $rc = 0 ] || fail "plain_allreduce exited with $rc"
    grep -aq "errors=0" "$log" || fail "wrong results"
    check_stats "$log" "$np" "$min"
}

# 9 calls of 4-8 MiB go to the ring; the 2 small ones pass through.
run 2 9 NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=1M
# On the MPI it was built for, nexar does not tell the user to rebuild it.
grep -aq "libnexar_pmpi was built for" "$log" && fail "nexar warned of another MPI on its own: $(grep -a 'was built for' "$log")"
run 3 9 NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=1MiB
run 2 0 NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=1M NEXAR_ENABLE=0
# Default settings: host buffers go where the learner finds them faster;
# each size's first calls try the ring (NEXAR_THRESHOLD_BYTES=auto), on
# every rank alike.
run 2 1
check_same_paths "$log"
# A number keeps today's meaning, and host buffers can still be turned off.
run 2 0 NEXAR_THRESHOLD_BYTES=16M
run 2 0 NEXAR_HOST_BUFFERS=0
# A malformed setting: one clear warning, the default is used, the job runs.
run 2 1 NEXAR_THRESHOLD_BYTES=lots
grep -aq "NEXAR_THRESHOLD_BYTES='lots' is not valid" "$log" || fail "no warning for a malformed setting"
[ "$(grep -ac "is not valid" "$log")" = 1 ] || fail "the warning must be printed once per job"
# UCX cannot start (or, in a build --without-ucx, is not there): one node
# needs none; shared memory takes every call, the log says so once per
# rank, the job succeeds.
run 2 9 NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=1M NEXAR_UCX_TLS=no_such_transport NEXAR_LOG=info
[ "$(grep -ac ": not needed on one node, nexar runs on shared memory" "$log")" = 2 ] ||
    fail "each rank must say once that UCX did not start and is not needed on one node"
check_bytes "$log" ucx_bytes zero
# UCX down on rank 0 only (MPMD), and rings that need it on every hop
# (NEXAR_SHM=0, NEXAR_NET=ucx): the ranks agree that the ring cannot run,
# every call falls back on both, no hang.
run 2 0 NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=1M NEXAR_SHM=0 NEXAR_NET=ucx -- 1 --rank-env LD_PRELOAD="$lib" --rank-env NEXAR_UCX_TLS=no_such_transport "$prog" \
    : -np 1 --rank-env LD_PRELOAD="$lib" "$prog"
[ "$(grep -ac "fallback_calls=9" "$log")" = 2 ] || fail "calls that a rank without UCX could not take must fall back on every rank"
# By default the ranks agree on the MPI's point-to-point instead.
run 2 9 NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=1M NEXAR_SHM=0 -- 1 --rank-env LD_PRELOAD="$lib" --rank-env NEXAR_UCX_TLS=no_such_transport "$prog" \
    : -np 1 --rank-env LD_PRELOAD="$lib" "$prog"
check_bytes "$log" mpi_bytes nonzero; check_bytes "$log" ucx_bytes zero
# The same with shared memory: rank 0's missing UCX costs nothing on one node.
run 2 9 NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=1M -- 1 --rank-env LD_PRELOAD="$lib" --rank-env NEXAR_UCX_TLS=no_such_transport "$prog" \
    : -np 1 --rank-env LD_PRELOAD="$lib" "$prog"
check_same_paths "$log"
echo "all preload runs passed"
