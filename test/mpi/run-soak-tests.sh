#!/bin/bash
# Soak: thousands of allreduces of random sizes (up to about 2 MiB), every
# datatype and op, in place and out of place, on MPI_COMM_WORLD, a dup and
# the two halves of a split used interleaved, each compared with
# PMPI_Allreduce and a local reference (test/mpi/allreduce_check.cc).
set -u
. "$(dirname "$0")/../lib.sh"
prog="$NEXAR_BUILDDIR/test/mpi/allreduce_check"
new_log
export NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=0 NEXAR_STATS=1
for spec in "2 5000 4000 250 101" "3 2000 2000 400 102" "4 1000 1000 0 103"; do
    set -- $spec
    echo "== $1 ranks, $2 allreduces"
    nexar_mpirun "$1" "$prog" --cases "$2" --max-count "$3" --big-every "$4" --seed "$5" >"$log" 2>&1
    rc=$?
    grep -av '^nexar: rank' "$log" | tail -n 5
    [ $rc = 0 ] || fail "soak at $1 ranks exited with $rc"
    check_stats "$log" "$1" 1
done
echo "soak passed"
