#!/bin/bash
# The test suite again on MPICH (Debian's mpich/libmpich-dev: mpicc.mpich,
# mpiexec.mpich), in a build of its own beside the in-tree one.
#
#   scripts/mpich-lane.sh [BUILDDIR]   (default: build/mpich)
#
# Copies the sources (the files git tracks, or the tree without build
# outputs) into BUILDDIR/src, configures them with MPICC=mpicc.mpich
# (configure then takes MPICH's mpiexec and mpifort), builds without CUDA
# (the device code does not depend on the MPI, and the GPU tests need a
# GPU), and runs make check there: every test (the GPU tests skip without
# a GPU, and say so).  Prints
# "mpich tests: P passed, F failed, S skipped"; exits non-zero on a failure.
set -eu
cd "$(dirname "$0")/.."
top=$PWD
build=${1:-build/mpich}
command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null ||
    { echo "mpich-lane: MPICH is not installed (apt-get install mpich libmpich-dev)" >&2; exit 1; }
jobs=$(nproc 2>/dev/null || echo 2)

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
./configure MPICC=mpicc.mpich --without-cuda ${CONFIGURE_FLAGS:-} | sed -n '/configuration summary/,$p'
make -j"$jobs" >/dev/null
make -j"$jobs" check TESTS= >/dev/null  # build the test programs in parallel
rc=0
make check || rc=$?
count_test_results .
echo "mpich tests: $pass passed, $fail failed, $skip skipped"
[ $rc = 0 ] && [ $fail = 0 ] && [ $pass -gt 0 ]
