#!/bin/bash
# A node without UCX (DESIGN.md section 3: a missing UCX never stops a job).
# The ordinary build, run where libucp, libucs, libuct and libucm are truly
# absent: an overlay over the folder that holds them, with a whiteout for
# each, in a private mount namespace (nothing on the machine changes, and
# the mount goes with the namespace).  Then:
#   - nexar-info runs and says ucx=not found, and that the MPI's
#     point-to-point serves between nodes;
#   - a plain MPI program that knows nothing of nexar starts with nexar
#     preloaded, gets the right results, and takes nexar's shared-memory
#     paths (ring, one-shot; no UCX byte);
#   - allreduce_check (linked with -lnexar_pmpi) is exact against PMPI_* for
#     every collective at 2 and 3 ranks; a call whose ring would need UCX
#     (NEXAR_SHM=0) goes to the MPI on every rank, exactly;
#   - nonblocking and persistent calls agree without UCX (PMPI_Iallreduce)
#     and are exact.
# Needs root (mount and unshare) and overlayfs; an MPI that links libucp
# itself (Debian's MPICH) cannot run where it is absent: skipped, saying so.
set -u
. "$(dirname "$0")/../lib.sh"
lib="$NEXAR_BUILDDIR/.libs/libnexar_pmpi.so"
plain="$NEXAR_BUILDDIR/test/preload/plain_allreduce"
check="$NEXAR_BUILDDIR/test/mpi/allreduce_check"
nonblocking="$NEXAR_BUILDDIR/test/mpi/nonblocking_check"
for f in "$lib" "$plain" "$check" "$nonblocking" "$NEXAR_BUILDDIR/nexar-info"; do [ -e "$f" ] || fail "$f not built"; done
readelf -d "$lib" | grep -q 'NEEDED.*libuc[pst]' && fail "libnexar_pmpi.so links UCX: $(readelf -d "$lib" | grep NEEDED)"
without="$(dirname "$0")/../../scripts/without-ucx"
[ -x "$without" ] || fail "$without is missing"
why=$("$without" --check)
case $? in 0) ;; 77) echo "SKIP: $why"; exit 77 ;; *) fail "$without --check failed: $why" ;; esac
# The MPI itself must run without UCX.
if ldd "$plain" | grep -q 'libucp\.so'; then
    echo "SKIP: this MPI links libucp itself ($(ldd "$plain" | grep -m1 -o 'libmpi[^ ]*')): no job of it starts where UCX is absent"
    exit 77
fi
new_log
ucx_dir=$("$without" --dir)
# without_ucx CMD...: CMD where the UCX libraries are absent.
without_ucx() { "$without" "$@"; }

# Proof that they are absent there.
without_ucx bash -c "ls '$ucx_dir'/libucp.so.0" >/dev/null 2>&1 && fail "the overlay did not hide $ucx_dir/libucp.so.0"
info=$(without_ucx "$NEXAR_BUILDDIR/nexar-info" -p) || fail "nexar-info failed where UCX is absent"
echo "$info" | grep -E '^(ucx|ucx_version|device_path)='
echo "$info" | grep -q '^ucx=not found (' || fail "nexar-info does not say ucx=not found"
echo "$info" | grep -qx 'ucx_version=none' || fail "nexar-info names a UCX version where none is"
echo "$info" | grep -qx "network=the MPI's point-to-point between nodes (no UCX)" ||
    fail "nexar-info does not say that the MPI's point-to-point serves between nodes without UCX"

# run NAME NP [VAR=VALUE...] -- [--rank-env VAR=VALUE] PROG ARGS...: under
# nexar_mpirun where UCX is absent, with NEXAR_STATS and NEXAR_LOG=info,
# the output in $log.
run() {
    local name=$1 np=$2; shift 2
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    echo "== $name: $np ranks ${envs[*]:-} $*"
    without_ucx env NEXAR_STATS=1 NEXAR_LOG=info "${envs[@]}" bash -c 'source "$0"; nexar_mpirun "$@"' \
        "$(dirname "$0")/../lib.sh" "$np" "$@" >"$log" 2>&1
    local rc=$?
    grep -av '^nexar: rank' "$log" | grep -av '^nexar\[rank' | tail -n 8
    [ $rc = 0 ] || { tail -n 30 "$log"; fail "$name at $np ranks exited with $rc where UCX is absent"; }
    grep -aq "UCX not found (.*): not needed on one node" "$log" || fail "the log does not say that UCX was not found"
    # (At 3 ranks allreduce_check's split makes a one-rank part: its calls pass through.)
    [ "$np" != 2 ] || check_same_paths "$log"
}

# A job that preloads nexar starts and runs on shared memory.
run preload 2 NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=1M -- --rank-env LD_PRELOAD="$(preload_value "$lib")" "$plain"
grep -aq "errors=0" "$log" || fail "wrong results"
check_stats "$log" 2 9
check_bytes "$log" shm_bytes nonzero; check_bytes "$log" ucx_bytes zero
# With no setting (the learnt threshold): it starts and is right.
run preload-default 2 -- --rank-env LD_PRELOAD="$(preload_value "$lib")" "$plain"
grep -aq "errors=0" "$log" || fail "wrong results with no setting"

# Every collective against PMPI_*: the ring, the one-shot (small vectors).
for coll in allreduce reduce_scatter_block reduce_scatter allgather; do
    run "$coll" 2 NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=0 -- "$check" --collective $coll --cases 120 \
        --max-count 20000 --big-every 30 --seed 47
    check_stats "$log" 2 1
    check_bytes "$log" ucx_bytes zero
done
check_bytes "$log" shm_bytes nonzero
run allreduce-3 3 NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=0 -- "$check" --cases 100 --max-count 5000 --big-every 50 --seed 48
check_stats "$log" 3 1
check_bytes "$log" ucx_bytes zero
# A ring whose hops are off shared memory (NEXAR_SHM=0) takes the MPI's
# point-to-point; with NEXAR_NET=ucx it goes to the MPI on every rank: no
# ring call, every eligible call fell back, results exact.
run no-shm 2 NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=0 NEXAR_SHM=0 -- "$check" --cases 60 --max-count 20000 --seed 49
check_stats "$log" 2 1
check_bytes "$log" mpi_bytes nonzero; check_bytes "$log" ucx_bytes zero; check_bytes "$log" shm_bytes zero
run no-shm-ucx-only 2 NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=0 NEXAR_SHM=0 NEXAR_NET=ucx NEXAR_ONE_SHOT_BYTES=0 -- \
    "$check" --cases 60 --max-count 20000 --seed 49 --expect-ring 0
check_stats "$log" 2 0
check_bytes "$log" fallback_calls nonzero
# Nonblocking and persistent calls: their agreement needs no UCX.
run nonblocking 2 NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=0 -- "$nonblocking" --rounds 10 --seed 47
[ "$(grep -ac '^nonblocking_check: rank [0-9]*: checks=[1-9][0-9]* errors=0$' "$log")" = 2 ] ||
    fail "not every rank reported its nonblocking checks without errors"
check_stats "$log" 2 40
check_bytes "$log" ucx_bytes zero
echo "PASS"
