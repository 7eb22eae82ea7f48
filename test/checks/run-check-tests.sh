#!/bin/bash
# The log checks of test/lib.sh, on logs made here: each must pass a good
# log, pass it too when a launcher message in it holds a NUL byte (as one of
# Open MPI 5's does: plain grep then calls the log binary and prints no
# line), and fail every log whose line or value it cannot read.  A check
# that passes what it cannot see would hide the very failures it is for.
# Runs no MPI job; lib.sh still asks this lane's launcher which it is.
set -u
. "$(dirname "$0")/../lib.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
checks=0

# must_pass DESCRIPTION CHECK ARGS... / must_fail DESCRIPTION CHECK ARGS...:
# the check in a subshell (fail exits), its message kept for the report.
must_pass() {
    local what=$1; shift
    checks=$((checks + 1))
    ("$@") 2>"$dir/msg" || fail "$what: the check failed a good log: $(cat "$dir/msg")"
}
must_fail() {
    local what=$1; shift
    checks=$((checks + 1))
    if ("$@") 2>"$dir/msg"; then fail "$what: the check passed a log it cannot read"; fi
    grep -aq '^FAIL: ' "$dir/msg" || fail "$what: the check failed without saying why"
    echo "ok: $what -> $(head -n 1 "$dir/msg")"
}

# log NAME LINE...: a log file with these lines; \0 in a line is a NUL byte.
log() {
    local f="$dir/$1"; shift
    printf '%b\n' "$@" >"$f"
    echo "$f"
}
# Open MPI 5's abort message ends in a NUL byte.
nul_line='prterun noticed that process rank 1 with PID 1234 on node vm exited on\0'

# --- check_fault_report FILE MODE TIMEOUT_S TOOK [VICTIMS] ---
# Rank 0's report, and the victims' stop times on the same clock: called at
# 100.0, the victim stopped at 100.5, the error at 103.6 (3.1 s after it).
report() { echo "fault_check stall: rank 0 got class $1 after $2 s (called at $3, error at $4)"; }
stop_line="fault_check: rank 1 stops itself (SIGSTOP) at 100.500000"
good=$(log good-fault "== stall, 2 ranks" "$stop_line" "$(report 16 3.60 100.000000 103.600000)")
must_pass "fault report" check_fault_report "$good" stall 3 5
f=$(log nul-fault "$nul_line" "$(report 16 3.60 100.000000 103.600000)" "signal 9 (Killed)." "$stop_line")
must_pass "fault report after a NUL byte" check_fault_report "$f" stall 3 5
# A call that ran long before the stall: 6.5 s from the call, 3.5 s from the stall.
f=$(log late-stall "fault_check: rank 1 stops itself (SIGSTOP) at 103.000000" "$(report 16 6.50 100.000000 106.500000)")
must_pass "fault report of a stall 3 s into the call" check_fault_report "$f" stall 3 5
# Two victims (a node): counted from the later one.
f=$(log two-victims "$stop_line" "fault_check: rank 2 stops itself (SIGSTOP) at 101.000000" \
    "$(report 16 4.00 100.000000 104.000000)")
must_pass "fault report with two victims" check_fault_report "$f" stall 3 5 2
must_fail "fault report with one of two victims' stops" check_fault_report "$good" stall 3 5 2
kill_line="fault_check: rank 2 stops itself (SIGKILL) at 100.500000"
f=$(log one-of-two-killed "$kill_line" "$(report 16 0.60 100.000000 100.600000)")
must_pass "fault report with one of two killed victims' stops (the other's output lost)" \
    check_fault_report "$f" stall 3 5 2
f=$(log three-of-two "$kill_line" "$kill_line" "$kill_line" "$(report 16 0.60 100.000000 100.600000)")
must_fail "fault report with more victims' stops than victims" check_fault_report "$f" stall 3 5 2
f=$(log refused "$(report 16 0.01 100.000000 100.010000)")
must_pass "fault report of refused calls, no victim" check_fault_report "$f" stall 0 5 0
f=$(log no-class "$nul_line" "$stop_line" "$(report '' 3.60 100.000000 103.600000)")
must_fail "fault report without a class" check_fault_report "$f" stall 3 5
f=$(log word-class "$stop_line" "$(report sixteen 3.60 100.000000 103.600000)")
must_fail "fault report with a class that is no number" check_fault_report "$f" stall 3 5
f=$(log no-time "$nul_line" "$stop_line" "$(report 16 '' 100.000000 103.600000)")
must_fail "fault report without a time" check_fault_report "$f" stall 3 5
f=$(log no-error-time "$stop_line" "$(report 16 3.60 100.000000 '')")
must_fail "fault report without the error's time" check_fault_report "$f" stall 3 5
f=$(log no-stop "$(report 16 3.60 100.000000 103.600000)")
must_fail "fault report without the victim's stop" check_fault_report "$f" stall 3 5
f=$(log bad-stop "fault_check: rank 1 stops itself (SIGSTOP) at soon" "$(report 16 3.60 100.000000 103.600000)")
must_fail "a victim's stop time that is no number" check_fault_report "$f" stall 3 5
f=$(log cut-line "$stop_line" "fault_check stall: rank 0 got class 16 aft")
must_fail "fault report cut short" check_fault_report "$f" stall 3 5
f=$(log none "$stop_line" "signal 9 (Killed).")
must_fail "no fault report" check_fault_report "$f" stall 3 5
f=$(log two-reports "$stop_line" "$(report 16 3.60 100.000000 103.600000)" "$(report 16 3.60 100.000000 103.600000)")
must_fail "two fault reports" check_fault_report "$f" stall 3 5
f=$(log success "$stop_line" "$(report 0 3.60 100.000000 103.600000)")
must_fail "a fault report of success" check_fault_report "$f" stall 3 5
# 4.6 s after the stall: late, though only 5.1 s after the call.
f=$(log late "$stop_line" "$(report 16 5.10 100.000000 105.100000)")
must_fail "a fault report after the timeout" check_fault_report "$f" stall 3 5
must_fail "a job time that is no number" check_fault_report "$good" stall 3 ""
must_fail "another mode's report" check_fault_report "$good" kill 3 5

# --- check_stats FILE NP MIN_RING and check_bytes FILE FIELD zero|nonzero ---
stats0='nexar: rank 0: ring_calls=9 ring_bytes=100 passthrough_calls=2 fallback_calls=0 shm_bytes=100 ucx_bytes=0'
stats1='nexar: rank 1: ring_calls=9 ring_bytes=100 passthrough_calls=2 fallback_calls=0 shm_bytes=100 ucx_bytes=0'
good=$(log good-stats "$stats0" "$nul_line" "$stats1")
must_pass "stats lines after a NUL byte" check_stats "$good" 2 9
must_pass "stats bytes" check_bytes "$good" shm_bytes nonzero
must_pass "stats bytes zero" check_bytes "$good" ucx_bytes zero
must_pass "one rank's stats" read_stats "$good" ring_calls 1
must_fail "stats of a rank that is not there" read_stats "$good" ring_calls 2
must_fail "too few ring calls" check_stats "$good" 2 10
must_fail "stats lines missing" check_stats "$good" 3 9
f=$(log no-calls "$stats0" "nexar: rank 1: ring_calls= ring_bytes=100 shm_bytes=100")
must_fail "stats line without a ring_calls number" check_stats "$f" 2 0
f=$(log no-field "$stats0" "nexar: rank 1: ring_calls=9 ring_bytes=100 ucx_bytes=0")
must_fail "stats line without the field" check_bytes "$f" shm_bytes nonzero
f=$(log prefix-field "$stats0" "nexar: rank 1: ring_calls=9 ring_bytes=100 xshm_bytes=5")
must_fail "stats line with only a longer field's name" check_bytes "$f" shm_bytes nonzero
f=$(log word-field "$stats0" "nexar: rank 1: ring_calls=9 shm_bytes=lots")
must_fail "stats value that is no number" check_bytes "$f" shm_bytes nonzero

# --- check_same_paths FILE: every rank's path counters alike ---
paths0='nexar: rank 0: ring_calls=9 ring_bytes=100 passthrough_calls=2 fallback_calls=0 shm_bytes=100 hier_calls=0 one_shot_calls=3'
paths1='nexar: rank 1: ring_calls=9 ring_bytes=100 passthrough_calls=2 fallback_calls=0 shm_bytes=90 hier_calls=0 one_shot_calls=3'
f=$(log same-paths "$paths0" "$nul_line" "$paths1")
must_pass "same paths (bytes may differ)" check_same_paths "$f"
f=$(log split-paths "$paths0" "${paths1/passthrough_calls=2/passthrough_calls=3}")
must_fail "a rank passed one more call through" check_same_paths "$f"
f=$(log split-one-shot "$paths0" "${paths1/one_shot_calls=3/one_shot_calls=2}")
must_fail "a rank took one fewer one-shot" check_same_paths "$f"
f=$(log paths-no-field "$paths0" "${paths1/ hier_calls=0/}")
must_fail "stats line without hier_calls" check_same_paths "$f"
f=$(log paths-none "== nothing")
must_fail "no stats line at all" check_same_paths "$f"
f=$(log no-stats "$nul_line")
must_fail "no stats lines" check_bytes "$f" shm_bytes zero

echo "all $checks log checks behaved: good logs pass, logs they cannot read fail"
