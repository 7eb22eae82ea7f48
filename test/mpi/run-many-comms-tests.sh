#!/bin/bash
# Many communicators (bench/many_comms.c, a plain MPI program, with the
# library preloaded): every communicator shares the process's UCX worker,
# so live communicators cost no file descriptors, and freeing them gives
# back what was theirs.
#   - 100 live communicators under `ulimit -n 256`, each with one large
#     allreduce: every call takes the ring (NEXAR_STATS), no descriptor is
#     added, results are exact; through shared memory and with NEXAR_SHM=0
#     (the UCX ring, which also adds almost no memory);
#   - 200 live communicators through shared memory: at most 128 MiB more
#     per rank;
#   - churn: 200 communicators created, used and freed: descriptors and
#     memory back to where they started, nothing left in /dev/shm;
#   - more communicators than the shared-memory budget keeps inboxes for,
#     used round after round: idle ones release their inboxes and set them
#     up again when used; results stay exact and memory bounded.
# Not timed: how long a new communicator's first call takes is measured by
# the same program, outside the tests (docs/user-guide.md, "Many communicators").
set -u
. "$(dirname "$0")/../lib.sh"
prog="$NEXAR_BUILDDIR/nexar_many_comms"
lib="$NEXAR_BUILDDIR/.libs/libnexar_pmpi.so"
new_log
# A fixed threshold: every large call takes the ring (the learner would
# send some trials to the MPI).
export NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=1M NEXAR_STATS=1 NEXAR_LOG=debug

# at_most FIELD LIMIT: on each of the 2 ranks' many_comms lines in $log,
# FIELD is a number (maybe negative or with a fraction) <= LIMIT.
at_most() {
    local line n=0
    while IFS= read -r line; do
        n=$((n + 1))
        [[ $line =~ \ $1=(-?[0-9]+(\.[0-9]+)?)(\ |$) ]] || fail "no number for $1 in: $line"
        awk -v v="${BASH_REMATCH[1]}" -v l="$2" 'BEGIN { exit !(v + 0 <= l + 0) }' ||
            fail "$1=${BASH_REMATCH[1]}, at most $2 allowed"
    done < <(grep -a '^many_comms: rank [0-9]*: ' "$log")
    [ "$n" = 2 ] || fail "expected 2 many_comms lines, found $n"
}

run() {  # run COMMS ULIMIT_N [VAR=VALUE...] -- ARGS...
    local comms=$1 limit=$2; shift 2
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    echo "== $comms communicators, ulimit -n $limit ${envs[*]:-} $*"
    (ulimit -n "$limit"; env "${envs[@]}" bash -c 'source "$0"; nexar_mpirun 2 --rank-env LD_PRELOAD="$1" "${@:2}"' \
        "$(dirname "$0")/../lib.sh" "$(preload_value "$lib")" "$prog" -n "$comms" "$@") >"$log" 2>&1
    local rc=$?
    grep -a "^many_comms\|warning" "$log" | head -n 6
    [ $rc = 0 ] || fail "many_comms exited with $rc"
    grep -aq "wrong=0" "$log" || fail "wrong results"
    check_stats "$log" 2 $((comms + 1))
    return 0
}

# leftovers: nexar-PID-... objects in /dev/shm whose process is gone (other
# jobs on the machine may have live ones).
leftovers() {
    local f pid
    for f in $(ls -A /dev/shm | grep -a '^nexar-'); do
        pid=${f#nexar-}; pid=${pid%%-*}
        kill -0 "$pid" 2>/dev/null || echo "$f"
    done
}
left_before=$(leftovers | sort)
run 100 256 -- -s 8388608
at_most extra_fds 0
# 200 live communicators through shared memory, each with its inboxes, its
# one-shot boards and one large allreduce: within 128 MiB per rank (the
# shared-memory budget releases idle contexts' inboxes).
run 200 1024 -- -s 8388608
at_most extra_rss_mib 128
run 100 256 NEXAR_SHM=0 -- -s 8388608
at_most extra_fds 0
at_most extra_rss_mib 128
run 200 1024 -- -s 8388608 --free
at_most after_free_fds 0
at_most after_free_rss_mib 16
run 40 1024 -- -s 8388608 --rounds 3 --free
at_most extra_rss_mib 128
at_most after_free_fds 0
grep -aq "shared-memory inboxes released" "$log" || fail "no context released its inboxes (budget not reached?)"
# Inboxes set up again serve the call that needed them: every call of the
# three rounds took the ring, none went to MPI.
check_stats "$log" 2 $((3 * 40 + 1))
check_bytes "$log" fallback_calls zero
left_new=$(leftovers | sort | comm -13 <(echo "$left_before") -)
[ -z "$left_new" ] || fail "shared-memory objects left in /dev/shm: $left_new"
echo "many-communicator runs passed"
