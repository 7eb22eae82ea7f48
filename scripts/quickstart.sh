#!/bin/bash
# The README's two commands.
#
#   scripts/quickstart.sh bench   install what is missing, build, and run the
#                                 osu-style benchmark (MPI vs nexar, 2 ranks)
#                                 and the mpi4py gradient exchange; on a
#                                 machine with a GPU also the GPU kernel and
#                                 device-buffer benchmarks
#   scripts/quickstart.sh test    install what is missing, build, and run the
#                                 whole test suite (make check) on Open MPI,
#                                 then again on MPICH in build/mpich
#                                 (scripts/mpich-lane.sh; NEXAR_MPICH_LANE=0
#                                 skips it)
#
# Builds in the source tree with ./configure's defaults (MPI, UCX and CUDA
# found on the system); set CONFIGURE_FLAGS to pass more options.
set -eu
cd "$(dirname "$0")/.."
what=${1:-}
case $what in bench|test) ;; *) sed -n '2,13p' "$0"; exit 2 ;; esac

scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
[ -x configure ] && [ configure -nt configure.ac ] || ./autogen.sh
# Reconfigure when configure is newer than the last configure run.
if [ ! -f Makefile ] || [ configure -nt config.status ]; then
    ./configure ${CONFIGURE_FLAGS:-}
fi
make -j"$jobs"

if [ "$what" = bench ]; then
    bench/nexar-osu -np 2 --malloc all -c -m 1048576:268435456 --csv bench/results.csv --plot bench/busbw.png
    echo "CSV: bench/results-{default,tuned,thp}.csv; plots: bench/busbw-{default,tuned,thp}.png"
    echo
    echo "## a real client: mpi4py + numpy gradient exchange, without and with nexar"
    bench/nexar-mpi4py-bench --runs 3 --csv bench/mpi4py-grad.csv
    echo "CSV: bench/mpi4py-grad.csv"
    if [ -x ./nexar_gpu_reduce_bench ] && nvidia-smi -L >/dev/null 2>&1; then
        echo
        echo "## GPU: nexar's reduction kernel against a device-to-device copy"
        ./nexar_gpu_reduce_bench --csv bench/gpu-kernel.csv
        echo
        echo "## GPU: device buffers, nexar against cudaMemcpy + PMPI_Allreduce + cudaMemcpy"
        NEXAR_HOST_BUFFERS=0 bench/nexar-osu -np 2 --malloc tuned -d cuda -c -m 64M:1G --csv bench/gpu-results.csv
        echo "CSV: bench/gpu-kernel.csv, bench/gpu-results.csv"
    fi
    exit 0
fi

make -j"$jobs" check TESTS=  # build the test programs in parallel
# Tests run one at a time: MPI ranks busy-poll and a small machine has few cores.
rc=0
make check || rc=$?
. scripts/test-results.sh
count_test_results .
show_failed_logs .
[ "$total" -gt 0 ] || { echo "quickstart: no test ran" >&2; exit 1; }
summary="tests: $pass passed, $fail failed"
[ "$skip" -gt 0 ] && summary="$summary, $skip skipped"
mpich_rc=0 mpich_summary=""
if [ "${NEXAR_MPICH_LANE:-1}" != 0 ]; then
    echo
    echo "## the same suite on MPICH (scripts/mpich-lane.sh)"
    scripts/mpich-lane.sh > build-mpich.log 2>&1 || mpich_rc=$?
    grep -E '^(PASS|FAIL|SKIP|ERROR|XPASS|XFAIL):' build-mpich.log || true
    if [ $mpich_rc != 0 ]; then
        tail -n 40 build-mpich.log
        show_failed_logs build/mpich/src
    fi
    mpich_summary=$(grep '^mpich tests:' build-mpich.log || echo "mpich tests: the lane failed before running (see build-mpich.log)")
fi
echo "$summary (Open MPI)"
[ -n "$mpich_summary" ] && echo "$mpich_summary"
[ $rc = 0 ] && [ $fail = 0 ] && [ $mpich_rc = 0 ]
