#!/bin/bash
# The README's two commands.
#
#   scripts/quickstart.sh bench   install what is missing, build, and run the
#                                 osu-style benchmark (MPI vs nexar, 2 ranks),
#                                 the nonblocking overlap and persistent
#                                 tables and the mpi4py gradient exchange; on a
#                                 machine with a GPU also the GPU kernel and
#                                 device-buffer benchmarks
#   scripts/quickstart.sh test    install what is missing, build, and run the
#                                 whole test suite (make check) on the system's
#                                 MPI (Open MPI 4.1), then again on MPICH in
#                                 build/mpich and on Open MPI 5 in
#                                 build/openmpi5 (scripts/mpi-lane.sh;
#                                 NEXAR_MPICH_LANE=0 or NEXAR_OPENMPI5_LANE=0
#                                 leaves a lane out; NEXAR_OPENMPI5_PREFIX
#                                 names an Open MPI 5 to use; with
#                                 NEXAR_REQUIRE_ALL_LANES=1, as in CI, a
#                                 lane that finds no MPI fails)
#
# Builds in the source tree with ./configure's defaults (MPI, UCX and CUDA
# found on the system); set CONFIGURE_FLAGS to pass more options.
# NEXAR_QUICKSTART_SMOKE=1 (CI) runs bench's every step on small sizes and
# few rounds: the command works end to end, in a minute or two.
set -eu
cd "$(dirname "$0")/.."
what=${1:-}
case $what in bench|test) ;; *) sed -n '2,20p' "$0"; exit 2 ;; esac

scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
[ -x configure ] && [ configure -nt configure.ac ] || ./autogen.sh
# Reconfigure when configure is newer than the last configure run.
if [ ! -f Makefile ] || [ configure -nt config.status ]; then
    ./configure ${CONFIGURE_FLAGS:-}
fi
make -j"$jobs"

if [ "$what" = bench ]; then
    # No NEXAR_* setting: what LD_PRELOAD alone gives (the path column says
    # which path each size settled on).
    sizes=4K:256M overlap=64K:16M persistent=4K:16M rounds=3 steps=12
    if [ "${NEXAR_QUICKSTART_SMOKE:-0}" = 1 ]; then
        echo "# NEXAR_QUICKSTART_SMOKE=1: small sizes and few rounds, to check the steps; not a measurement"
        sizes=4K:1M overlap=64K:1M persistent=4K:256K rounds=1 steps=2
    fi
    bench/nexar-osu -np 2 --malloc all -c -m "$sizes" --csv bench/results.csv --plot bench/busbw.png
    echo "CSV: bench/results-{default,tuned,thp}.csv; plots: bench/busbw-{default,tuned,thp}.png"
    echo
    echo "## nonblocking: MPI_Iallreduce's overlap with computation, MPI and nexar"
    bench/nexar-overlap -np 2 -c -m "$overlap" --csv bench/overlap.csv
    echo "## persistent and nonblocking against blocking"
    bench/nexar-overlap -np 2 --persistent -m "$persistent" -r "$rounds" --csv bench/persistent.csv
    echo "CSV: bench/overlap.csv, bench/persistent.csv"
    echo
    echo "## a real client: mpi4py + numpy gradient exchange, without and with nexar"
    bench/nexar-mpi4py-bench --runs "$rounds" --steps "$steps" --csv bench/mpi4py-grad.csv
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
# make's own failure (a test it could not even start) is a failure too.
[ $rc = 0 ] || [ $fail -gt 0 ] || fail=1
system_mpi=$(sed -n 's/^MPIRUN = //p' Makefile)
system_mpi=$("${system_mpi:-mpirun}" --version 2>&1 | sed -n '1s/.*(\(.*\)) \([0-9][0-9.a-z]*\).*/\1 \2/p')
summaries=("tests: $pass passed, $fail failed, $skip skipped (${system_mpi:-the system MPI})")
total_pass=$pass total_fail=$fail total_skip=$skip

# run_lane LANE: the suite on another MPI (scripts/mpi-lane.sh), its output
# in build-LANE.log; adds its summary line and counts.
lanes_rc=0
run_lane() {
    local lane=$1 lane_rc=0 line
    echo
    echo "## the same suite on $lane (scripts/mpi-lane.sh $lane)"
    scripts/mpi-lane.sh "$lane" >"build-$lane.log" 2>&1 || lane_rc=$?
    grep -aE '^(PASS|FAIL|SKIP|ERROR|XPASS|XFAIL):' "build-$lane.log" || true
    line=$(grep -a "^$lane tests:" "build-$lane.log" | tail -n 1)
    if [ $lane_rc = 77 ]; then
        if [ "${NEXAR_REQUIRE_ALL_LANES:-0}" = 1 ]; then
            line="$line (a failure here: NEXAR_REQUIRE_ALL_LANES=1)"
            total_fail=$((total_fail + 1))
            lanes_rc=1
        fi
        echo "$line"
        summaries+=("$line")
        return
    fi
    if [ $lane_rc != 0 ]; then
        tail -n 40 "build-$lane.log"
        show_failed_logs "build/$lane/src"
        lanes_rc=1
    fi
    if [[ $line =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped ]]; then
        total_pass=$((total_pass + BASH_REMATCH[1]))
        total_fail=$((total_fail + BASH_REMATCH[2]))
        total_skip=$((total_skip + BASH_REMATCH[3]))
    else
        line="$lane tests: the lane failed before running (see build-$lane.log)"
        total_fail=$((total_fail + 1))
    fi
    summaries+=("$line")
}
[ "${NEXAR_MPICH_LANE:-1}" = 0 ] || run_lane mpich
[ "${NEXAR_NO_UCX_LANE:-1}" = 0 ] || run_lane no-ucx
[ "${NEXAR_OPENMPI5_LANE:-1}" = 0 ] || run_lane openmpi5
echo
printf '%s\n' "${summaries[@]}"
echo "all: $total_pass passed, $total_fail failed, $total_skip skipped"
[ $rc = 0 ] && [ $fail = 0 ] && [ $lanes_rc = 0 ]
