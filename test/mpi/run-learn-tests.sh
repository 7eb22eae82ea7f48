#!/bin/bash
# The learnt threshold (NEXAR_THRESHOLD_BYTES=auto, host buffers auto): the
# defaults, with no other NEXAR_* setting than the stats and the log.
# learn_check runs each collective at every size from 4 bytes, more calls
# than a learning round: both paths at each size (the trials), then the one
# it settled on; each result is checked against values computed in the
# program, and every rank's path counters must move alike at every size.
# Here, too: every rank's NEXAR_STATS line counts the same calls on each
# path, and NEXAR_LOG=info says where each collective's crossover landed.
# The same in a job where a GPU may come, on host buffers and on device
# buffers.
set -u
. "$(dirname "$0")/../lib.sh"
prog="$NEXAR_BUILDDIR/test/mpi/learn_check"
new_log
unset NEXAR_THRESHOLD_BYTES NEXAR_HOST_BUFFERS
export NEXAR_STATS=1 NEXAR_LOG=info

run() {  # run NP ARGS...
    local np=$1; shift
    echo "== $np ranks $*"
    nexar_mpirun "$np" "$prog" "$@" >"$log" 2>&1
    local rc=$?
    grep -av '^nexar' "$log" | tail -n 60
    [ $rc = 0 ] || fail "learn_check at $np ranks exited with $rc"
    check_stats "$log" "$np" 1
    check_same_paths "$log"
    grep -aq "MPI_Allreduce out of place on ${kind:-host} buffers took" "$log" ||
        fail "NEXAR_LOG=info did not say where the crossover landed"
    grep -a "on ${kind:-host} buffers took" "$log"
    # The version, once, from rank 0 (nexar.h's NEXAR_VERSION, the .pc file's Version).
    local version
    version=$(sed -n 's/^Version: //p' "$NEXAR_BUILDDIR/nexar_pmpi.pc")
    [ -n "$version" ] || fail "no Version in $NEXAR_BUILDDIR/nexar_pmpi.pc"
    [ "$(grep -ac "^nexar\[rank 0\]: nexar $version, built for [A-Z]" "$log")" = 1 ] ||
        fail "NEXAR_LOG=info did not say nexar's version ($version) once"
}

run 2 --max 4194304 --calls 24
# Whether segments went by address here (CMA allowed between the ranks).
read_stats "$log" cma_bytes
by_address=1
for v in "${values[@]}"; do [ "$v" -gt 0 ] || by_address=0; done
# More ranks than cores: smaller sizes.
run 3 --max 262144 --calls 20
# A job where a GPU may come (the emulated GPU's plugin loaded on every
# rank, as the CUDA driver would be): host buffers, nonblocking calls among
# them, learn and take nexar exactly as in a job without one.
plugin="$NEXAR_BUILDDIR/test/gpu/.libs/libnexar_emulated_gpu.so"
[ -f "$plugin" ] || fail "the emulated GPU plugin was not built: $plugin"
NEXAR_EMULATED_GPU_PLUGIN="$plugin" run 2 --max 1048576 --calls 24
grep -aq "device buffers: staged through pinned host memory" "$log" || fail "nexar did not load the emulated GPU"
grep -aq "threshold: learnt per communicator and size: allreduces of every size, reduce-scatters and allgathers from 2KiB" "$log" || fail "a job with a GPU did not learn"
# The copy chooser tried its modes there too (NEXAR_SHM_COPY=auto): where
# the job without a GPU sent segments by address, so did this one.
read_stats "$log" cma_bytes
for v in "${values[@]}"; do
    [ $by_address = 0 ] || [ "$v" -gt 0 ] || fail "cma_bytes=$v on a rank of a job with a GPU: the copy chooser tried no mode but slots"
done
# Device buffers there (the emulated GPU's on every rank): each collective's
# device class is learnt the same way (nexar's path, GPU to GPU through IPC
# here, against the MPI's, staged through host memory), every rank on the
# same path at every size.
NEXAR_EMULATED_GPU_PLUGIN="$plugin" kind=device run 2 --max 1048576 --calls 24 --device
read_stats "$log" ipc_calls
for v in "${values[@]}"; do [ "$v" -gt 0 ] || fail "ipc_calls=$v on a rank: no device call went GPU to GPU"; done
read_stats "$log" staged_calls
for v in "${values[@]}"; do [ "$v" -gt 0 ] || fail "staged_calls=$v on a rank: no device call went to the MPI"; done
echo "PASS"
