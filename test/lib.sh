# Shared helpers of the shell tests (sourced).
# MPIRUN and NEXAR_BUILDDIR come from `make check` (AM_TESTS_ENVIRONMENT).
: "${MPIRUN:=mpirun}"
: "${NEXAR_BUILDDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# Wall-clock limit of one mpirun: a hang fails the test instead of CI.
: "${NEXAR_TEST_TIMEOUT:=600}"
# nexar's waits give their core away every 64 polls in the tests, unless a
# test sets NEXAR_YIELD itself: the launcher and the checks share this
# 2-core machine with the ranks, and the suite's times were measured so.
# run-mpi-tests.sh checks the default, auto.  (The broken log lines once
# blamed on auto were a program's stdout flushed mid-line in front of
# nexar's stderr lines: run-report-tests.sh keeps the two apart.)
: "${NEXAR_YIELD:=1}"
export NEXAR_YIELD

# Which launcher $MPIRUN is (orte: Open MPI 4.x; prrte: Open MPI 5.x; hydra:
# MPICH's mpiexec), from its --version, by the same function as the
# installed cluster tool (test/cluster/nexar-cluster), and so which MPI
# family the build is for (configure checks that they match): openmpi or
# mpich.  Exported, so that nested runs do not ask again.
. "$(dirname "${BASH_SOURCE[0]}")/cluster/nexar-cluster"
if [ -z "${NEXAR_MPI_LAUNCHER:-}" ]; then
    NEXAR_MPI_LAUNCHER=$(MPIRUN=$MPIRUN nxc_launcher) || { echo "FAIL: cannot tell which MPI $MPIRUN is" >&2; exit 1; }
fi
case $NEXAR_MPI_LAUNCHER in
    orte | prrte) NEXAR_MPI_FAMILY=openmpi ;;
    hydra) NEXAR_MPI_FAMILY=mpich ;;
    *) echo "FAIL: NEXAR_MPI_LAUNCHER=$NEXAR_MPI_LAUNCHER: not orte, prrte or hydra" >&2; exit 1 ;;
esac
export NEXAR_MPI_LAUNCHER NEXAR_MPI_FAMILY

# nexar_mpirun NP [ARGS...] CMD...: the MPI's launcher for this machine.
# Open MPI's mpirun with root allowed, more ranks than cores allowed, and
# without the AVX op component whose 8-bit sums are wrong in Open MPI 4.1.4
# (it would spoil the reference); MPICH's mpiexec (Hydra) as it is.  Two
# pseudo-options, anywhere before each program (MPMD contexts too), are
# spelled for the launcher:
#   --rank-env VAR=VALUE   set VAR in the ranks only, not in the launcher
#                          (Open MPI: -x VAR=VALUE; MPICH: -env VAR VALUE)
#   --keep-going           a rank that exits non-zero, or is killed, does not
#                          end the others (nxc_keep_going_options)
nexar_mpirun() {
    local np=$1; shift
    local args=(-np "$np") rest=() keep
    if [ "$NEXAR_MPI_FAMILY" = openmpi ]; then
        args=(--oversubscribe --mca op ^avx "${args[@]}")
        [ "$(id -u)" = 0 ] && args=(--allow-run-as-root "${args[@]}")
    fi
    while [ $# -gt 0 ]; do
        case $1 in
            --rank-env)
                if [ "$NEXAR_MPI_FAMILY" = openmpi ]; then rest+=(-x "$2"); else rest+=(-env "${2%%=*}" "${2#*=}"); fi
                shift 2 ;;
            --keep-going)
                mapfile -t keep < <(nxc_keep_going_options "$NEXAR_MPI_LAUNCHER")
                rest+=("${keep[@]}")
                shift ;;
            *) rest+=("$1"); shift ;;
        esac
    done
    timeout "$NEXAR_TEST_TIMEOUT" "$MPIRUN" "${args[@]}" "${rest[@]}"
}

# nexar_mpirun_env NP [VAR=VALUE...] -- ARGS...: nexar_mpirun NP ARGS...
# with the variables set for the launcher and so its ranks (env cannot run
# a shell function).
nexar_mpirun_env() {
    local np=$1; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    (
        [ ${#envs[@]} = 0 ] || export "${envs[@]}"
        nexar_mpirun "$np" "$@"
    )
}

fail() { echo "FAIL: $*" >&2; exit 1; }

# ucx_runs_here: nexar's UCX loads and starts on this machine (nexar-info's
# ucx=loaded); not so in a build --without-ucx or where libucp is absent.
ucx_runs_here() { "$NEXAR_BUILDDIR/nexar-info" -p 2>/dev/null | grep -q '^ucx=loaded '; }

# new_log: a temporary file for mpirun's output in $log, removed at exit.
new_log() {
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
}

# preload_value LIB: what LD_PRELOAD must hold to load LIB into a rank.  A
# sanitizer build's library needs the sanitizer runtimes loaded first.
preload_value() {
    local v=$1
    case " ${NEXAR_SAN_FLAGS:-} " in
        *sanitize=address*)
            v="$(${CC:-cc} -print-file-name=libasan.so):$(${CC:-cc} -print-file-name=libubsan.so):$v" ;;
    esac
    echo "$v"
}

# Every check that reads a log reads it as text (grep -a): a launcher's
# message may hold a NUL byte (one of Open MPI 5's does), and plain grep then
# calls the log binary and prints "binary file matches" instead of the line.
# Every check that extracts a value fails when the value is missing or is
# not a number: a check that cannot see must never pass.

# stats_lines FILE [RANK]: FILE's NEXAR_STATS lines (RANK: only that rank's).
stats_lines() { grep -a "^nexar: rank ${2:-[0-9]*}: ring_calls=" "$1"; }

# read_stats FILE FIELD [RANK]: sets the array `values` to FIELD's number on
# each NEXAR_STATS line of FILE, in the order of the lines (RANK: only that
# rank's line, which must be there once).  Fails the test when there is no
# such line, or a line has no number for FIELD.
read_stats() {
    local file=$1 field=$2 line
    values=()
    while IFS= read -r line; do
        [[ $line =~ \ $field=([0-9]+)(\ |$) ]] || fail "no number for $field in this NEXAR_STATS line of $file: $line"
        values+=("${BASH_REMATCH[1]}")
    done < <(stats_lines "$file" "${3:-}")
    [ ${#values[@]} -gt 0 ] || fail "no NEXAR_STATS line${3:+ of rank $3} in $file"
    [ -z "${3:-}" ] || [ ${#values[@]} = 1 ] || fail "${#values[@]} NEXAR_STATS lines of rank $3 in $file"
}

# check_stats FILE NP MIN_RING: FILE holds NP NEXAR_STATS lines, one per
# rank, each with ring_calls >= MIN_RING (0 means: exactly 0).
check_stats() {
    local file=$1 np=$2 min=$3 calls
    read_stats "$file" ring_calls
    [ ${#values[@]} = "$np" ] || fail "expected $np NEXAR_STATS lines, found ${#values[@]} in $file"
    for calls in "${values[@]}"; do
        if [ "$min" = 0 ]; then
            [ "$calls" = 0 ] || fail "ring_calls=$calls where none were expected"
        else
            [ "$calls" -ge "$min" ] || fail "ring_calls=$calls, expected at least $min"
        fi
    done
}

# check_same_paths FILE: every rank's NEXAR_STATS line counts the same
# calls on each path (ring, one-shot, hierarchical, passed through, fallen
# back): no rank took a path another did not.
check_same_paths() {
    local file=$1 field first v
    for field in ring_calls one_shot_calls hier_calls passthrough_calls fallback_calls; do
        read_stats "$file" "$field"
        first=${values[0]}
        for v in "${values[@]}"; do
            [ "$v" = "$first" ] || fail "ranks took different paths: $field differs ($(stats_lines "$file" | tr '\n' ' '))"
        done
    done
}

# check_bytes FILE FIELD zero|nonzero: every NEXAR_STATS line's FIELD
# (shm_bytes, ucx_bytes, a *_calls counter) is 0, or is not.
check_bytes() {
    local file=$1 field=$2 want=$3 v
    read_stats "$file" "$field"
    for v in "${values[@]}"; do
        case $want in
            zero) [ "$v" = 0 ] || fail "$field=$v where none were expected" ;;
            nonzero) [ "$v" != 0 ] || fail "$field=0 on a rank that should have sent over it" ;;
            *) fail "check_bytes: want zero or nonzero, not '$want'" ;;
        esac
    done
}

# check_fault_report FILE MODE TIMEOUT_S TOOK [VICTIMS]: fault_check MODE's
# report in FILE, one line "fault_check MODE: rank 0 got class C after S s
# (called at T0, error at T1)", says rank 0 got an error (C a number, not
# 0) within TIMEOUT_S + fault_slack_s of the stall, and the whole job took
# at most 60 s (TOOK).  The stall is the moment the last of the VICTIMS
# (default 1) victims stopped itself: each says so in a line "fault_check:
# rank R stops itself (SIG) at T" (test/fault_clock.h), on the clock of T0
# and T1 (of killed victims, at least one line must be there).  Measured from the stall, not from the call's start: the victims
# stop only once their own ring has reduced a segment, and what runs
# before (the agreement, a first connection, a busy machine) is not the
# timeout's to cover.  VICTIMS 0: a run with no victim (calls refused), its
# error measured from the call.  Says how long the call ran before the
# stall and how long the error took after it; with NEXAR_FAULT_TIMINGS set,
# appends "LABEL ERROR-AFTER-STALL CALL-BEFORE-STALL" to that file (LABEL:
# $fault_label where the caller set it, else MODE).
#
# fault_slack_s: what may pass between the stall and rank 0's error beyond
# TIMEOUT_S.  Rank 0's ring still moves bytes for a moment after the stall
# (sends into the network's socket buffers, what the pipeline had in
# flight), and a failed ring over UCX gives UCX up to 0.5 s to hand its
# buffers back (transport/ucx_channel.cc, kAbortWaitSeconds per channel).
# Measured: docs/testing.md, "Fault timings".  NEXAR_FAULT_SLACK_S sets it
# (to measure the distribution without stopping at the first late run).
fault_slack_s=${NEXAR_FAULT_SLACK_S:-1.5}
check_fault_report() {
    local file=$1 mode=$2 timeout_s=$3 took=$4 victims=${5:-1} lines class secs called errored stops since
    lines=$(grep -a "fault_check $mode: rank 0 got class" "$file") || fail "$mode: rank 0 never returned from the ring"
    [ "$(echo "$lines" | wc -l)" = 1 ] || fail "$mode: more than one report from rank 0: $lines"
    [[ $lines =~ fault_check\ $mode:\ rank\ 0\ got\ class\ ([0-9]+)\ after\ ([0-9]+(\.[0-9]+)?)\ s\ \(called\ at\ ([0-9]+\.[0-9]+),\ error\ at\ ([0-9]+\.[0-9]+)\)$ ]] ||
        fail "$mode: cannot read the class and the times in rank 0's report: '$lines'"
    class=${BASH_REMATCH[1]} secs=${BASH_REMATCH[2]} called=${BASH_REMATCH[4]} errored=${BASH_REMATCH[5]}
    [ "$class" != 0 ] || fail "$mode: the ring reported success with a dead peer"
    since=$called
    if [ "$victims" != 0 ]; then
        local lines_of_stops n
        lines_of_stops=$(grep -aoE "fault_check: rank [0-9]+ stops itself \((SIGSTOP|SIGKILL)\) at [0-9]+\.[0-9]+" "$file")
        stops=$(echo "$lines_of_stops" | sed -n 's/.* at //p' | sort -g)
        n=$(echo "$stops" | grep -c .)
        # A stopped victim's line always arrives; a killed one's may be lost
        # when the launcher takes its output down with it (Open MPI 5's
        # PRRTE, a whole node killed): then at least one must say.
        if echo "$lines_of_stops" | grep -aq SIGSTOP || [ "$n" -lt 1 ] || [ "$n" -gt "$victims" ]; then
            [ "$n" = "$victims" ] ||
                fail "$mode: expected $victims victims to say when they stopped, found: $(echo $stops)"
        fi
        since=$(echo "$stops" | tail -n 1)
    fi
    local timings
    timings=$(awk -v c="$called" -v s="$since" -v e="$errored" 'BEGIN { printf "%.3f %.3f", e - s, s - c }')
    local after=${timings% *} before=${timings#* }
    if [ "$victims" != 0 ]; then
        echo "$mode: the call ran $before s before the stall; rank 0's error came $after s after it" \
            "(NEXAR_TIMEOUT_S=$timeout_s, allowed $timeout_s + $fault_slack_s)"
        [ -z "${NEXAR_FAULT_TIMINGS:-}" ] || echo "${fault_label:-$mode} $after $before" >>"$NEXAR_FAULT_TIMINGS"
    fi
    awk -v a="$after" -v t="$timeout_s" -v k="$fault_slack_s" 'BEGIN { exit !(a <= t + k) }' ||
        fail "$mode: the error came $after s after the stall, NEXAR_TIMEOUT_S is $timeout_s"
    [[ $took =~ ^[0-9]+$ ]] || fail "$mode: the job's time '$took' is not a number"
    [ "$took" -le 60 ] || fail "$mode: the job took $took s to end"
}

# check_device_fault FILE MODE TIMEOUT_S TOOK WHAT: after a run of
# allreduce_cuda_check --emulated-gpu --fault MODE, no process of it stays
# (a stopped rank that the launcher did not take down, as Open MPI 5's
# PRRTE may leave, would outlive the test), rank 0's report passes
# check_fault_report, and the error came from WHAT ("an IPC allreduce").
check_device_fault() {
    local file=$1 mode=$2 timeout_s=$3 took=$4 what=$5
    pkill -KILL -f -- "allreduce_cuda_check --emulated-gpu --fault $mode" 2>/dev/null
    grep -a "fault_check\|$what" "$file" | head -n 3
    check_fault_report "$file" "$mode" "$timeout_s" "$took"
    grep -aq "$what" "$file" ||
        fail "$mode: the error did not come from $what: $(grep -a 'nexar\[rank 0\]: error' "$file" | head -n 2)"
}
