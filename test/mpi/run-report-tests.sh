#!/bin/bash
# NEXAR_REPORT (runtime/job_report.h), checked against what the same job
# says elsewhere (test/mpi/report_check.py): its counts against every
# rank's NEXAR_STATS counters, exactly; its MPI estimates against the MPI
# trials the learner logs at NEXAR_LOG=debug; classes without trials,
# nonblocking and persistent calls, and a fixed threshold said to be
# unmeasured; nexar disabled said to have taken nothing; the CSV file's
# job-id placeholder; an unwritable file reported, the job unharmed; the
# picture (scripts/nexar-report-plot).
set -u
. "$(dirname "$0")/../lib.sh"
check="$NEXAR_SRCDIR/test/mpi/report_check.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
new_log
unset NEXAR_THRESHOLD_BYTES NEXAR_HOST_BUFFERS NEXAR_ENABLE NEXAR_REPORT NEXAR_LOG
export NEXAR_STATS=1

# run NAME PROG ARGS... (NEXAR_* settings from the environment).  Each
# rank's stdout and stderr go to files of their own, put together into $log
# afterwards: the checks count nexar's log lines, and a program's buffered
# stdout, flushed in blocks that end mid-line, would otherwise put a line
# of the program's in front of one of nexar's (seen in CI).
run() {
    local name=$1; shift
    echo "== $name: $*"
    rm -f "$tmp"/rank-*.out "$tmp"/rank-*.err
    nexar_mpirun 2 sh -c 'r=${OMPI_COMM_WORLD_RANK:-$PMI_RANK}; exec "$@" >"$0/rank-$r.out" 2>"$0/rank-$r.err"' \
        "$tmp" "$@" >"$log" 2>&1
    local rc=$?
    cat "$tmp"/rank-*.out "$tmp"/rank-*.err >>"$log" 2>/dev/null
    grep -a "^nexar report" "$log"
    [ $rc = 0 ] || { tail -n 40 "$log"; fail "$name: the job exited with $rc"; }
}
# the_csv: the one CSV file the last job wrote into $tmp.
the_csv() {
    local files=("$tmp"/*.csv)
    [ ${#files[@]} = 1 ] && [ -f "${files[0]}" ] || fail "expected one CSV file in $tmp, found: $(ls "$tmp")"
    csv=${files[0]}
    grep -aq "^nexar report: written to $csv$" "$log" || fail "the report did not say it wrote $csv"
}

# 1. The learnt threshold: every collective at every size from 4 bytes,
# more calls than a learning round, so that sizes settle on both paths.
NEXAR_LOG=debug NEXAR_REPORT="$tmp/report-%j-%p.csv" run learnt "$NEXAR_BUILDDIR/test/mpi/learn_check" --max 1048576 --calls 24
the_csv
[[ $(basename "$csv") =~ ^report-[A-Za-z0-9._-]+-[0-9]+\.csv$ ]] || fail "the placeholders were not filled in: $csv"
python3 "$check" --log "$log" --csv "$csv" --ranks 2 --estimates \
    --expect "MPI_Allreduce" --expect "MPI_Reduce_scatter" --expect "MPI_Allgather" --expect " saved (" ||
    fail "the learnt job's report does not agree with its counters or its trials (lines above)"
grep -aq ",MPI,,,0,,$" "$csv" || fail "no size class went to the MPI in the learnt job"
grep -aEq ",(ring|one-shot),[0-9.e-]+,[0-9.e-]+,[1-9][0-9]*,[0-9.e-]+,$" "$csv" || fail "no size class nexar took has both its time and an estimate"
# The picture (gnuplot: scripts/install-deps.sh installs it; a tarball's
# `make check` may run where it is missing).
if command -v gnuplot >/dev/null 2>&1; then
    "$NEXAR_SRCDIR/scripts/nexar-report-plot" "$csv" "$tmp/report.png" || fail "nexar-report-plot failed"
    [ "$(head -c 4 "$tmp/report.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "nexar-report-plot wrote no PNG"
else
    echo "NOT CHECKED: nexar-report-plot (gnuplot is not installed)"
fi
rm -f "$tmp"/*.csv "$tmp"/*.png

# 2. Nonblocking and persistent calls and a fixed threshold: nexar takes
# them, no trial times the MPI, and the report says they are not measured.
NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=0 NEXAR_REPORT="$tmp/fixed.csv" \
    run "fixed threshold, nonblocking" "$NEXAR_BUILDDIR/test/mpi/nonblocking_check" --rounds 2
the_csv
python3 "$check" --log "$log" --csv "$csv" --ranks 2 --expect "MPI_Iallreduce" --expect "MPI_Allreduce_init" \
    --expect "nonblocking or persistent calls (their time is the application's too)" \
    --expect "(a fixed threshold: no trials)" ||
    fail "the fixed-threshold job's report does not agree with its counters (lines above)"
grep -aq "^MPI_Iallreduce,nonblocking,.*,ring,,,0,,nonblocking" "$csv" || fail "a nonblocking row has a time or an estimate"
grep -aq "^MPI_Allreduce,blocking,.*,ring,[0-9.e-]*,,0,,a fixed threshold: no trials$" "$csv" ||
    fail "a blocking row under a fixed threshold does not say it had no trials"
rm -f "$tmp"/*.csv

# 3. nexar disabled: it took nothing, and says so.
linked="$NEXAR_BUILDDIR/test/preload/linked_allreduce"
NEXAR_ENABLE=0 NEXAR_REPORT=1 run disabled "$linked" --halves
read_stats "$log" passthrough_calls 0
[ "${values[0]}" = 13 ] || fail "with NEXAR_ENABLE=0, passthrough_calls=${values[0]}: the program makes 13 calls"
grep -aq "^nexar report: nexar took nothing (NEXAR_ENABLE=0): all ${values[0]} calls (.*) went to the MPI$" "$log" ||
    fail "with NEXAR_ENABLE=0 the report did not say nexar took nothing of the ${values[0]} calls"

# 4. A file that cannot be written: said, and the job ends well.
NEXAR_REPORT="$tmp/no/such/dir/r.csv" run unwritable "$linked" --halves
grep -aq "NEXAR_REPORT: cannot write the report to $tmp/no/such/dir/r.csv: No such file or directory" "$log" ||
    fail "an unwritable NEXAR_REPORT file was not reported"
grep -aq "^nexar report: nexar took" "$log" || fail "the table was not printed beside the failed file"
# Its 8 MiB allreduce class had one MPI trial, the first of its block (cold: left out):
# those calls have no estimate, and the closing line says so.
grep -aq "^nexar report: nexar took .*; not measured: [1-9][0-9]* calls whose buffers and sizes had no warm MPI trial$" "$log" ||
    fail "calls of a class without a warm MPI trial were not said to be unmeasured"
echo "the job report agrees with the counters and the trials"
