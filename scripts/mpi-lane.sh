#!/bin/bash
# The whole test suite again on another MPI, in a build of its own beside
# the in-tree one (which is built for the system's MPI, Open MPI 4.1 on
# Debian 12).
#
#   scripts/mpi-lane.sh mpich [BUILDDIR]      (default: build/mpich)
#       Debian's MPICH (mpich, libmpich-dev: mpicc.mpich, mpiexec.mpich).
#   scripts/mpi-lane.sh no-ucx [BUILDDIR]     (default: build/no-ucx)
#       The system's MPI, nexar configured --without-ucx: the unit tests,
#       the MPI tests at 2-5 ranks and the differential test only (the
#       rest needs UCX or is the same code as the in-tree build's).
#   scripts/mpi-lane.sh openmpi5 [BUILDDIR]   (default: build/openmpi5)
#       Open MPI 5 from NEXAR_OPENMPI5_PREFIX (its installation prefix);
#       without it, the prebuilt Open MPI 5 tarball that sits beside the
#       checkout (../shared/mpi/openmpi-5*-x86_64.tar.xz), unpacked into
#       BUILDDIR/mpi once.
#
# Copies the sources (the files git tracks, or the tree without build
# outputs) into BUILDDIR/src, configures them with the lane's mpicc
# (configure then takes the mpirun/mpiexec and mpifort beside it), builds
# without CUDA (the device code does not depend on the MPI, and the GPU
# tests need a GPU), and runs make check there: every test (the GPU tests
# skip without a GPU, and say so).  Prints "LANE tests: P passed, F failed,
# S skipped" and exits non-zero on a failure.  The openmpi5 lane adds one
# check of its own after make check: the in-tree build (for Open MPI 4)
# preloaded into an Open MPI 5 job warns that it should be rebuilt.  Where
# no Open MPI 5 can be found, the openmpi5 lane says so in one line
# ("openmpi5 tests: not run: ...") and exits 77: skipped, never a pass.  A
# missing MPICH is a failure: scripts/install-deps.sh installs it.
#
# NEXAR_LANE_BUILD_ONLY=1 builds the library and the test programs and stops
# there (to run one test script against the lane by hand, as
# docs/testing.md's fault timings do).
set -eu -o pipefail
cd "$(dirname "$0")/.."
top=$PWD
system_path=$PATH  # before a lane puts its MPI first
lane=${1:-}
build=${2:-build/$lane}
case $build in /*) ;; *) build=$top/$build ;; esac
skip() { echo "$lane tests: not run: $*"; exit 77; }
die() { echo "mpi-lane $lane: $*" >&2; exit 1; }

# find_openmpi5: sets prefix to the Open MPI 5 to test, unpacking the
# tarball when no prefix is named; skips the lane when there is neither.
find_openmpi5() {
    local p=${NEXAR_OPENMPI5_PREFIX:-}
    if [ -z "$p" ]; then
        local tarball stamp top_dir
        tarball=$( (ls "$top"/../shared/mpi/openmpi-5*-x86_64.tar.xz 2>/dev/null || true) | sort -V | tail -n 1)
        [ -n "$tarball" ] ||
            skip "no Open MPI 5 (set NEXAR_OPENMPI5_PREFIX to its prefix, or put its tarball in ../shared/mpi/)"
        [ "$(uname -m)" = x86_64 ] || skip "$(basename "$tarball") is built for x86_64, this machine is $(uname -m)"
        top_dir=$( (tar -tJf "$tarball" || true) | head -n 1)  # tar may see head leave early
        top_dir=${top_dir%%/*}
        [ -n "$top_dir" ] || die "cannot read $tarball"
        p="$build/mpi/$top_dir"
        stamp=$(stat -c '%n %s %Y' "$tarball")
        if [ "$(cat "$build/mpi/.unpacked" 2>/dev/null)" != "$stamp" ]; then
            rm -rf "$build/mpi"
            mkdir -p "$build/mpi"
            tar -xJf "$tarball" -C "$build/mpi" || die "cannot unpack $tarball"
            echo "$stamp" >"$build/mpi/.unpacked"
            echo "mpi-lane openmpi5: unpacked $(basename "$tarball") into $build/mpi"
        fi
    fi
    [ -x "$p/bin/mpicc" ] && [ -x "$p/bin/mpirun" ] ||
        die "$p has no bin/mpicc and bin/mpirun: NEXAR_OPENMPI5_PREFIX must name an Open MPI 5 installation"
    prefix=$p
}

case $lane in
    mpich)
        command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null ||
            die "MPICH is not installed (apt-get install mpich libmpich-dev)"
        mpicc=mpicc.mpich
        ;;
    no-ucx)
        mpicc=mpicc
        lane_configure=(--without-ucx)
        lane_tests="test/unit/nexar_unit_tests test/mpi/run-mpi-tests.sh test/mpi/run-diff-tests.sh test/preload/run-preload-tests.sh"
        ;;
    openmpi5)
        find_openmpi5
        # A relocated Open MPI finds its data files through these three.
        export OPAL_PREFIX=$prefix PRTE_PREFIX=$prefix PMIX_INSTALL_PREFIX=$prefix
        export PATH="$prefix/bin:$PATH"
        mpicc="$prefix/bin/mpicc"
        launcher=$(. test/cluster/nexar-cluster && MPIRUN="$prefix/bin/mpirun" nxc_launcher) ||
            die "cannot run $prefix/bin/mpirun"
        version=$( ("$prefix/bin/mpirun" --version 2>&1 || true) | head -n 1)
        [ "$launcher" = prrte ] || die "$prefix/bin/mpirun is not Open MPI 5's: $version"
        echo "$lane: $version in $prefix"
        ;;
    *) echo "usage: scripts/mpi-lane.sh mpich|openmpi5|no-ucx [BUILDDIR]" >&2; exit 2 ;;
esac
jobs=$(nproc 2>/dev/null || echo 2)
# The UCX with CUDA that scripts/cuda-ucx.sh unpacks: the checkout's (its
# prebuilt copy sits beside the checkout, not beside the lane's copy of
# the sources), one for every lane.
export NEXAR_CUDA_UCX_DIR=${NEXAR_CUDA_UCX_DIR:-$top/build/ucx-cuda}
if [ -z "${NEXAR_CUDA_UCX_TARBALL:-}" ]; then
    cuda_ucx=$( (ls "$top"/../shared/ucx/ucx-*-cuda-*.tar.xz 2>/dev/null || true) | sort -V | tail -n 1)
    [ -z "$cuda_ucx" ] || export NEXAR_CUDA_UCX_TARBALL=$cuda_ucx
fi

rm -rf "$build/src"
mkdir -p "$build/src"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # Tracked files as they are in the working tree (uncommitted edits too).
    git -C "$top" ls-files -z | (cd "$top" && xargs -0 cp --parents -t "$build/src")
else
    tar -C "$top" --exclude=./build --exclude='*.o' --exclude='*.lo' --exclude=.libs --exclude=.deps \
        --exclude=Makefile --exclude=config.status --exclude=config.log -cf - . | tar -C "$build/src" -xf -
fi
. scripts/test-results.sh
cd "$build/src"
./autogen.sh >/dev/null
./configure MPICC="$mpicc" --without-cuda ${lane_configure[@]+"${lane_configure[@]}"} ${CONFIGURE_FLAGS:-} | sed -n '/configuration summary/,$p'
make -j"$jobs" >/dev/null
make -j"$jobs" check TESTS= >/dev/null  # build the test programs in parallel
if [ "${NEXAR_LANE_BUILD_ONLY:-0}" = 1 ]; then
    echo "$lane: built in $build/src (NEXAR_LANE_BUILD_ONLY=1: no tests run)"
    exit 0
fi
rc=0
# The randomized differential test runs for a set time: the main suite
# gives it 40 s a run, each lane half of that (CI's time budget; the lanes
# look for what differs between the MPIs, which its first calls meet).
export NEXAR_DIFF_SECONDS=${NEXAR_DIFF_SECONDS:-20}
if [ -n "${lane_tests:-}" ]; then make check TESTS="$lane_tests" || rc=$?; else make check || rc=$?; fi
count_test_results .

# rebuild_warning_check: the user who moved to Open MPI 5 and kept the
# library built for Open MPI 4 (the in-tree build, made for the system's
# MPI): preloaded into an Open MPI 5 job, it says once that it should be
# rebuilt, and the job still runs right.  Returns 2 where it cannot run.
rebuild_warning_check() {
    local old="$top/.libs/libnexar_pmpi.so" old_mpirun log status=0
    old_mpirun=$(sed -n 's/^MPIRUN = //p' "$top/Makefile" 2>/dev/null || true)
    if [ ! -f "$old" ] || [ -z "$old_mpirun" ]; then
        echo "rebuild-warning check: not run: no in-tree build of nexar"; return 2
    fi
    # Asked as the system sees it: not through this lane's PATH and prefixes.
    if ! env -u OPAL_PREFIX -u PRTE_PREFIX -u PMIX_INSTALL_PREFIX PATH="$system_path" "$old_mpirun" --version 2>&1 |
            grep -aq '(Open MPI) 4\.'; then
        echo "rebuild-warning check: not run: the in-tree build is not for Open MPI 4"; return 2
    fi
    log=$(mktemp)
    NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=1M NEXAR_STATS=1 MPIRUN="$prefix/bin/mpirun" \
        bash -c '. test/lib.sh; nexar_mpirun 2 --rank-env LD_PRELOAD="$0" test/preload/plain_allreduce' "$old" \
        >"$log" 2>&1 || status=$?
    (
        . test/lib.sh
        [ $status = 0 ] || fail "plain_allreduce with the Open MPI 4 build preloaded exited with $status"
        [ "$(grep -ac 'libnexar_pmpi was built for Open MPI 4\.[0-9.]* but runs on Open MPI 5\.' "$log")" = 1 ] ||
            fail "no single warning that the Open MPI 4 build runs on Open MPI 5"
        grep -aq "errors=0" "$log" || fail "wrong results"
        check_stats "$log" 2 9
    ) || status=1
    grep -a 'was built for\|errors=\|^FAIL' "$log"
    rm -f "$log"
    if [ $status = 0 ]; then echo "PASS: rebuild-warning check"; else echo "FAIL: rebuild-warning check"; fi
    return $status
}
if [ "$lane" = openmpi5 ]; then
    check_rc=0
    rebuild_warning_check || check_rc=$?
    case $check_rc in 0) pass=$((pass + 1)) ;; 2) ;; *) fail=$((fail + 1)); rc=1 ;; esac
fi
# make's own failure (a test it could not even start), or no test passing
# at all, is a failure too.
[ $rc = 0 ] || [ $fail -gt 0 ] || fail=1
[ $pass -gt 0 ] || [ $fail -gt 0 ] || fail=1
echo "$lane tests: $pass passed, $fail failed, $skip skipped"
[ $rc = 0 ] && [ $fail = 0 ] && [ $pass -gt 0 ]
