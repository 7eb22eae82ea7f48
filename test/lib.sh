# Shared helpers of the shell tests (sourced).
# MPIRUN and NEXAR_BUILDDIR come from `make check` (AM_TESTS_ENVIRONMENT).
: "${MPIRUN:=mpirun}"
: "${NEXAR_BUILDDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
# Wall-clock limit of one mpirun: a hang fails the test instead of CI.
: "${NEXAR_TEST_TIMEOUT:=600}"

# Which MPI family the launcher (and so the build, configure checks it)
# belongs to: openmpi or mpich.
if [ -z "${NEXAR_MPI_FAMILY:-}" ]; then
    if "$MPIRUN" --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then NEXAR_MPI_FAMILY=openmpi; else NEXAR_MPI_FAMILY=mpich; fi
fi

# nexar_mpirun NP [ARGS...] CMD...: the MPI's launcher for this machine.
# Open MPI's mpirun with root allowed, more ranks than cores allowed, and
# without the AVX op component whose 8-bit sums are wrong in Open MPI 4.1.4
# (it would spoil the reference); MPICH's mpiexec (Hydra) as it is.  Two
# pseudo-options, anywhere before each program (MPMD contexts too), are
# spelled for the family:
#   --rank-env VAR=VALUE   set VAR in the ranks only, not in the launcher
#                          (Open MPI: -x VAR=VALUE; MPICH: -env VAR VALUE)
#   --keep-going           a rank that exits non-zero does not kill the others
nexar_mpirun() {
    local np=$1; shift
    local args=(-np "$np") rest=()
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
                if [ "$NEXAR_MPI_FAMILY" = openmpi ]; then rest+=(--mca orte_abort_on_non_zero_status 0)
                else rest+=(-disable-auto-cleanup); fi
                shift ;;
            *) rest+=("$1"); shift ;;
        esac
    done
    timeout "$NEXAR_TEST_TIMEOUT" "$MPIRUN" "${args[@]}" "${rest[@]}"
}

fail() { echo "FAIL: $*" >&2; exit 1; }

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

# check_stats FILE NP MIN_RING: FILE holds NP NEXAR_STATS lines, one per
# rank, each with ring_calls >= MIN_RING (0 means: exactly 0).
check_stats() {
    local file=$1 np=$2 min=$3 lines
    lines=$(grep -c '^nexar: rank [0-9]*: ring_calls=' "$file")
    [ "$lines" = "$np" ] || fail "expected $np NEXAR_STATS lines, found $lines in $file"
    while read -r calls; do
        if [ "$min" = 0 ]; then
            [ "$calls" = 0 ] || fail "ring_calls=$calls where none were expected"
        else
            [ "$calls" -ge "$min" ] || fail "ring_calls=$calls, expected at least $min"
        fi
    done < <(sed -n 's/^nexar: rank [0-9]*: ring_calls=\([0-9]*\) .*/\1/p' "$file")
}

# stats_values FILE FIELD: the FIELD=N values of FILE's NEXAR_STATS lines, one a line.
stats_values() {
    sed -n "s/^nexar: rank [0-9]*: .* $2=\([0-9]*\).*/\1/p" "$1"
}

# check_bytes FILE FIELD zero|nonzero: every NEXAR_STATS line's FIELD
# (shm_bytes, ucx_bytes) is 0, or is not.
check_bytes() {
    local file=$1 field=$2 want=$3 v n=0
    while read -r v; do
        n=$((n + 1))
        case $want in
            zero) [ "$v" = 0 ] || fail "$field=$v where none were expected" ;;
            nonzero) [ "$v" != 0 ] || fail "$field=0 on a rank that should have sent over it" ;;
        esac
    done < <(stats_values "$file" "$field")
    [ "$n" -gt 0 ] || fail "no $field in the NEXAR_STATS lines of $file"
}

# check_fault_report FILE MODE TIMEOUT_S TOOK: fault_check MODE's report in
# FILE says rank 0 got an error (a non-zero class) within TIMEOUT_S + 1.5 s,
# and the whole job took at most 60 s (TOOK).
check_fault_report() {
    local file=$1 mode=$2 timeout_s=$3 took=$4 line class secs
    line=$(grep "fault_check $mode: rank 0 got class" "$file") || fail "$mode: rank 0 never returned from the ring"
    class=$(echo "$line" | sed 's/.*got class \([0-9]*\) after.*/\1/')
    secs=$(echo "$line" | sed 's/.* after \([0-9.]*\) s/\1/')
    [ "$class" != 0 ] || fail "$mode: the ring reported success with a dead peer"
    awk -v s="$secs" -v t="$timeout_s" 'BEGIN { exit !(s <= t + 1.5) }' ||
        fail "$mode: the error took $secs s, NEXAR_TIMEOUT_S is $timeout_s"
    [ "$took" -le 60 ] || fail "$mode: the job took $took s to end"
}
