#!/bin/bash
# MPI correctness at 2, 3, 4 and 5 ranks (oversubscribed on small machines):
# every eligible allreduce goes to the ring (threshold 0, host buffers on),
# results are compared with PMPI_Allreduce and a local reference, and the
# NEXAR_STATS lines must show that the ring ran on every rank.  Ranks of one
# node take the shared-memory ring by default; NEXAR_SHM=0 runs check the
# UCX ring that ranks on different nodes use.
set -u
. "$(dirname "$0")/../lib.sh"
prog="$NEXAR_BUILDDIR/test/mpi/allreduce_check"
new_log
export NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=0 NEXAR_STATS=1 NEXAR_LOG=info

run() {  # run NP [env...] -- ARGS...
    local np=$1; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    echo "== $np ranks ${envs[*]:-} $*"
    env "${envs[@]}" bash -c 'source "$0"; nexar_mpirun "$@"' "$(dirname "$0")/../lib.sh" "$np" "$prog" "$@" >"$log" 2>&1
    local rc=$?
    grep -v '^nexar: rank' "$log" | tail -n 20
    [ $rc = 0 ] || fail "allreduce_check at $np ranks exited with $rc"
    check_stats "$log" "$np" "$min_ring"
    # Which channels the ring took (path=shm or path=ucx before run): on
    # one node every hop is in shared memory unless NEXAR_SHM=0.
    case ${path:-} in
        shm) grep -q "; $np of $np ring hops through shared memory" "$log" || fail "not every hop used shared memory"
             check_bytes "$log" shm_bytes nonzero; check_bytes "$log" ucx_bytes zero ;;
        ucx) grep -q "ring hops through shared memory" "$log" && fail "NEXAR_SHM=0 still used shared memory"
             check_bytes "$log" shm_bytes zero; check_bytes "$log" ucx_bytes nonzero ;;
    esac
    return 0
}
min_ring=1

# More ranks than cores busy-poll against each other: fewer and smaller
# cases as the rank count grows.
path=shm run 2 -- --cases 400 --max-count 20000 --big-every 25 --seed 11
run 2 NEXAR_SEGMENT_BYTES=4K NEXAR_PIPELINE_DEPTH=2 -- --cases 120 --max-count 20000 --big-every 20 --seed 12
run 3 -- --cases 240 --max-count 5000 --big-every 60 --seed 13
run 4 -- --cases 200 --max-count 3000 --big-every 100 --seed 14
path=shm run 5 NEXAR_SEGMENT_BYTES=1K -- --cases 160 --max-count 2000 --big-every 0 --seed 15
# The UCX ring on host buffers.
path=ucx run 2 NEXAR_SHM=0 -- --cases 300 --max-count 20000 --big-every 25 --seed 17
path=ucx run 3 NEXAR_SHM=0 NEXAR_SEGMENT_BYTES=4K -- --cases 160 --max-count 5000 --big-every 60 --seed 18
# Everything passes through (threshold above every size): MPI's own results,
# nexar's 16-bit float ops inside PMPI_Allreduce, against the local reference.
min_ring=0 run 3 NEXAR_THRESHOLD_BYTES=1G -- --cases 120 --max-count 3000 --big-every 0 --seed 16 --expect-ring 0
echo "all MPI runs passed"
