#!/bin/bash
# The randomized differential test (test/mpi/diff_check.cc): calls drawn
# from a new seed each run, through nexar and through the MPI's own entry
# points, compared bit for bit.  At 2 and 3 ranks with every eligible call
# sent to nexar (NEXAR_THRESHOLD_BYTES=0, host buffers on), then at 2 ranks
# with no setting at all (the learnt threshold routes each size).  Each run
# prints its seed; a failure prints the call and the line that replays it.
#
#   NEXAR_DIFF_SECONDS   seconds of each forced run (default 40; the run
#                        with no setting takes half)
#   NEXAR_DIFF_SEED      a seed to replay instead of a new one
#
# On demand, longer: test/mpi/run-diff-tests.sh --minutes N (each run N
# minutes), or diff_check itself under mpirun (its header says how).
set -u
. "$(dirname "$0")/../lib.sh"
prog="$NEXAR_BUILDDIR/test/mpi/diff_check"
[ -x "$prog" ] || fail "$prog is not built (make check builds it)"
seconds=${NEXAR_DIFF_SECONDS:-40}
if [ "${1:-}" = --minutes ]; then
    [[ ${2:-} =~ ^[0-9]+$ ]] || fail "--minutes wants a whole number"
    seconds=$(($2 * 60))
fi
[[ $seconds =~ ^[0-9]+$ ]] && [ "$seconds" -gt 0 ] || fail "NEXAR_DIFF_SECONDS=$seconds: not a number of seconds"
seed_args=()
[ -n "${NEXAR_DIFF_SEED:-}" ] && seed_args=(--seed "$NEXAR_DIFF_SEED")
new_log

# run NP SECONDS [VAR=VALUE...]: one run; its output in $log, shown in part.
run() {
    local np=$1 secs=$2; shift 2
    echo "== diff_check, $np ranks, $secs s ${*:-(no NEXAR_* setting)}"
    env NEXAR_TEST_TIMEOUT=$((secs + 300)) NEXAR_STATS=1 "$@" bash -c 'source "$0"; nexar_mpirun "$@"' \
        "$(dirname "$0")/../lib.sh" "$np" "$prog" --seconds "$secs" "${seed_args[@]}" >"$log" 2>&1
    local rc=$?
    grep -a "^diff_check" "$log"
    if [ $rc != 0 ]; then
        grep -a "FAIL" "$log" | head -n 5
        fail "diff_check at $np ranks exited with $rc (the replay line above names the seed and the call)"
    fi
    grep -aqE "^diff_check: [0-9]+ calls, 0 failed \(seed [0-9]+\)$" "$log" || fail "diff_check at $np ranks: no closing line"
    local calls
    calls=$(sed -n 's/^diff_check: \([0-9]*\) calls, 0 failed.*/\1/p' "$log")
    [ "$calls" -ge 50 ] || fail "diff_check at $np ranks ran only $calls calls in $secs s"
}

run 2 "$seconds" NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=0
check_stats "$log" 2 1  # nexar took calls on every rank
check_bytes "$log" known_one_shots nonzero  # runs of one shape: the known one-shot
run 3 "$seconds" NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=0
check_stats "$log" 3 1
run 2 $(((seconds + 1) / 2))
echo "all differential runs passed"
