#!/bin/bash
# Faults and bad input at MPI level (test/mpi/fault_check.cc): argument
# errors get MPI's error classes, mismatched counts an MPI_ERR_COUNT on every
# rank, a killed or stalled peer an error within NEXAR_TIMEOUT_S, scratch that
# cannot be allocated a warning and a pass-through, and MPI_THREAD_MULTIPLE
# correct results.  (A UCX that will not start and malformed settings are in
# test/preload/run-preload-tests.sh.)
#
# NEXAR_FAULT_ONLY=1 runs only the killed and stalled peers, each
# NEXAR_FAULT_REPEAT times (default 1), with NEXAR_FAULT_TIMINGS naming a
# file that collects each run's error-after-stall (test/lib.sh,
# check_fault_report): how the timeout's bound is measured on a busy machine.
set -u
. "$(dirname "$0")/../lib.sh"
prog="$NEXAR_BUILDDIR/test/mpi/fault_check"
new_log
export NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=0 NEXAR_STATS=1

run() {  # run NP MODE [VAR=VALUE...]; leaves the output in $log, returns mpirun's status
    local np=$1 mode=$2; shift 2
    echo "== $mode, $np ranks ${*:-}"
    env "$@" bash -c 'source "$0"; nexar_mpirun "$@"' "$(dirname "$0")/../lib.sh" "$np" \
        --keep-going "$prog" "$mode" >"$log" 2>&1
}
must_pass() {
    run "$@"
    local rc=$?
    grep -av '^\[' "$log" | grep -av "mpool.c" | tail -n 12
    [ $rc = 0 ] || fail "fault_check $2 at $1 ranks exited with $rc"
    grep -aq "failures=0" "$log" || fail "fault_check $2 at $1 ranks"
}

repeat=${NEXAR_FAULT_REPEAT:-1}
[[ $repeat =~ ^[1-9][0-9]*$ ]] || fail "NEXAR_FAULT_REPEAT=$repeat: not a count"
if [ "${NEXAR_FAULT_ONLY:-0}" != 1 ]; then
must_pass 2 errors
must_pass 3 errors
must_pass 2 count-mismatch
must_pass 3 count-mismatch
grep -aq "ranks passed different counts" "$log" || fail "no clear message for mismatched counts"
grep -aq "ranks passed different recvcounts arrays" "$log" || fail "no clear message for mismatched recvcounts"
must_pass 2 threads
# The same over UCX: the threads' rings share the process's worker (UCX's
# multi-thread mode) and its endpoints; only tag ids keep them apart.
must_pass 2 threads NEXAR_SHM=0
must_pass 3 threads NEXAR_SHM=0
# A ring that fails on one communicator closes endpoints the others share:
# their next call reconnects and takes the ring.
must_pass 2 shared-endpoint NEXAR_SHM=0 NEXAR_TIMEOUT_S=3
must_pass 2 shared-endpoint NEXAR_TIMEOUT_S=3
# Over the MPI's point-to-point: mismatched counts, and two threads' rings
# on communicators of their own (MPI_THREAD_MULTIPLE).
must_pass 2 count-mismatch NEXAR_SHM=0 NEXAR_NET=mpi
must_pass 2 threads NEXAR_SHM=0 NEXAR_NET=mpi
check_bytes "$log" mpi_bytes nonzero

# Scratch that cannot be had (an in-place call, which needs receive slots;
# too large for shared-memory inboxes): 1 GiB segments x 64 under a 1.5 GB address
# space.  A sanitizer build cannot live under `ulimit -v` (ASan reserves
# terabytes of shadow memory): there ASan's own allocation cap does it.
oom_env=(NEXAR_SEGMENT_BYTES=1G NEXAR_PIPELINE_DEPTH=64)
limit=1500000
case " ${NEXAR_SAN_FLAGS:-} " in
    *sanitize=address*)
        oom_env+=(ASAN_OPTIONS="${ASAN_OPTIONS:-}:max_allocation_size_mb=1024:allocator_may_return_null=1")
        limit=unlimited ;;
esac
(ulimit -v $limit; must_pass 2 oom "${oom_env[@]}") || exit 1
(ulimit -v $limit; run 2 oom "${oom_env[@]}")
grep -aq "no memory for .* of ring scratch" "$log" || fail "no warning when scratch cannot be allocated"
fi

# A peer that dies, or stops, in the middle of a 256 MiB ring.  Rank 0 must
# get an error (MPI_ERR_OTHER) within the timeout, then aborts the job.
# Every ring: shared memory (same node), UCX (NEXAR_SHM=0) and the MPI's
# point-to-point (NEXAR_NET=mpi).
# On MPICH only the stalled peer: when a process dies, MPICH (ch4:ucx) and
# its launcher end the job themselves, sometimes before rank 0 can report.
# The same for a nonblocking call (i*) and a persistent one (pstall),
# completed by an MPI_Waitall beside requests that must complete; and a
# one-shot allreduce (a small vector) whose peer died before its part
# (kill-small); a blocking small allreduce whose peer died or stopped
# before the meeting on the boards that carries its agreement (kill-meet,
# stall-meet), or before a known one-shot, which has no meeting
# (kill-known, stall-known); the same for a known MPI_Iallreduce, which
# publishes at its start and reduces in its MPI_Wait (ikill-known,
# istall-known).
modes="kill stall kill-ucx stall-ucx ikill istall-ucx pstall kill-small kill-meet stall-meet kill-known stall-known ikill-known istall-known kill-mpi stall-mpi"
if [ "$NEXAR_MPI_FAMILY" = mpich ]; then
    modes="stall stall-ucx istall-ucx pstall stall-meet stall-known istall-known stall-mpi"
    echo "(kill, kill-ucx and ikill not run: MPICH ends the job itself when a process dies)"
fi
for mode in $(for _ in $(seq "$repeat"); do echo $modes; done); do
    timeout_s=3
    fault_label="$NEXAR_MPI_LAUNCHER $mode"
    start=$(date +%s)
    case $mode in
        *-ucx) mode=${mode%-ucx}; run 2 "$mode" NEXAR_TIMEOUT_S=$timeout_s NEXAR_SHM=0 ;;
        *-mpi) mode=${mode%-mpi}; run 2 "$mode" NEXAR_TIMEOUT_S=$timeout_s NEXAR_SHM=0 NEXAR_NET=mpi ;;
        *) run 2 "$mode" NEXAR_TIMEOUT_S=$timeout_s ;;
    esac
    took=$(($(date +%s) - start))
    # A stopped victim that the launcher did not take down (Open MPI 5's
    # PRRTE left stall-known's and istall-known's) must not outlive the test.
    pkill -KILL -f -- "fault_check $mode\$" 2>/dev/null
    grep -av '^\[' "$log" | grep -av "mpool.c" | head -n 4
    check_fault_report "$log" "$mode" "$timeout_s" "$took"
    if [ "$mode" = kill-small ]; then
        grep -aq "has exited in the middle of a one-shot allreduce" "$log" ||
            fail "kill-small: the error did not come from the one-shot allreduce"
    fi
    case $mode in
        kill-meet) grep -aq "has exited in the middle of the agreement on a call" "$log" ||
                       fail "kill-meet: the error did not come from the meeting on the boards" ;;
        stall-meet) grep -aq "the agreement on a call waits for rank 1" "$log" ||
                        fail "stall-meet: the error did not come from the meeting on the boards" ;;
        kill-known) grep -aq "has exited in the middle of a known one-shot allreduce" "$log" ||
                        fail "kill-known: the error did not come from the known one-shot" ;;
        stall-known) grep -aq "a known one-shot allreduce waits for rank 1" "$log" ||
                         fail "stall-known: the error did not come from the known one-shot" ;;
        ikill-known) grep -aq "MPI_Iallreduce of 1024 bytes.*has exited in the middle of a known one-shot allreduce" "$log" ||
                         fail "ikill-known: the error did not come from the nonblocking known one-shot" ;;
        istall-known) grep -aq "MPI_Iallreduce of 1024 bytes.*a known one-shot allreduce waits for rank 1" "$log" ||
                          fail "istall-known: the error did not come from the nonblocking known one-shot" ;;
    esac
done
# The check must not pass what it cannot read: this lane's own last report,
# with its class, its time or the victim's stop broken on purpose, fails it.
broken="$log.broken"
trap 'rm -f "$log" "$broken"' EXIT
for breakage in 's/got class [0-9]*/got class /' 's/ after [0-9.]* s/ after  s/' 's/error at [0-9.]*/error at /' \
    '/stops itself/d'; do
    sed "$breakage" "$log" >"$broken"
    (check_fault_report "$broken" "$mode" "$timeout_s" "$took") 2>/dev/null &&
        fail "check_fault_report passed $mode's report broken by sed '$breakage'"
done
echo "check_fault_report fails $mode's real report with the class, a time or the victim's stop removed"
echo "all fault runs passed"
