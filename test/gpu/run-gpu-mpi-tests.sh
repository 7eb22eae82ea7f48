#!/bin/bash
# MPI tests with CUDA device buffers at 2 and 4 ranks sharing the machine's
# GPU(s): allreduces GPU to GPU through CUDA IPC (cudaMalloc's buffers and
# the virtual-memory API's), the staged path (NEXAR_CUDA_IPC=0), the direct
# path when UCX can move CUDA memory, and ranks mixing host and device
# buffers.  Skipped (exit 77, with the reason) on a machine without a GPU.
#
# NEXAR_GPU_MPI_DIRECT_ONLY=1: only the direct path, which must then run
# (UCX moves CUDA memory: scripts/cuda-ucx.sh's UCX through
# LD_LIBRARY_PATH): every collective at 2 and 4 ranks, every device call's
# bytes moved by UCX (direct_calls).
#
# NEXAR_GPU_MPI_REHEARSAL=1 (test/gpu/run-on-device.sh's rehearsal on a
# machine without a GPU): the emulated GPU that NEXAR_EMULATED_GPU_PLUGIN
# names stands in for the GPU, and for a CUDA-aware UCX on the direct path
# (NEXAR_EMULATED_GPU_CUDA_AWARE_UCX=1): this script's logic is rehearsed,
# not CUDA.
set -u
. "$(dirname "$0")/../lib.sh"
# NEXAR_CUDA_CHECK: the program itself where the libtool wrapper cannot run
# (test/gpu/run-on-device.sh, on another machine).
prog="${NEXAR_CUDA_CHECK:-$NEXAR_BUILDDIR/test/gpu/allreduce_cuda_check}"
new_log
export NEXAR_THRESHOLD_BYTES=0 NEXAR_STATS=1
rehearsal=${NEXAR_GPU_MPI_REHEARSAL:-0}
stand_in=()  # the rehearsal's stand-in for a CUDA-aware UCX
[ "$rehearsal" = 1 ] && stand_in=(NEXAR_EMULATED_GPU_CUDA_AWARE_UCX=1)

run() {  # run NP VAR=VALUE... [-- ARGS]
    local np=$1; shift
    local envs=() args=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    [ $# -gt 0 ] && { shift; args=("$@"); }
    [ "$rehearsal" = 1 ] && args+=(--emulated-gpu)
    echo "== $np ranks ${envs[*]:-} ${args[*]:-}"
    env "${envs[@]}" bash -c 'source "$0"; nexar_mpirun "$@"' "$(dirname "$0")/../lib.sh" "$np" "$prog" "${args[@]}" >"$log" 2>&1
    local rc=$?
    grep -av '^nexar: rank' "$log" | tail -n 20
    if grep -aq "^SKIP:" "$log"; then exit 77; fi
    [ $rc = 0 ] || fail "allreduce_cuda_check at $np ranks exited with $rc"
    check_stats "$log" "$np" "$min_ring"
}
min_ring=1
# every_rank FIELD: each rank's FIELD (NEXAR_STATS) is above zero.
every_rank() {
    local v
    read_stats "$log" "$1"
    for v in "${values[@]}"; do [ "$v" -gt 0 ] || fail "$1=$v on a rank: expected calls there"; done
}

# direct_runs: the direct path at 2 and 4 ranks, every device call on it.
direct_runs() {
    local np
    for np in 2 4; do
        run $np NEXAR_LOG=info NEXAR_CUDA_IPC=0 NEXAR_CUDA_PATH=direct "${stand_in[@]}" -- --quick
        [ "$(grep -ac 'device buffers: direct (CUDA-aware UCX) path' "$log")" = $np ] ||
            fail "not every rank took the direct path: $(grep -a 'UCX .* up\|device buffers' "$log" | head -n 3)"
        every_rank direct_calls
    done
}
if [ "${NEXAR_GPU_MPI_DIRECT_ONLY:-0}" = 1 ]; then
    [ "$rehearsal" = 1 ] || nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no GPU (nvidia-smi -L)"; exit 77; }
    direct_runs
    echo "direct path runs passed"
    exit 0
fi

# GPU to GPU through CUDA IPC (the default for one node).
run 2
every_rank ipc_calls
run 4
every_rank ipc_calls
# NEXAR_CUDA_IPC=require: a device allreduce that could not take IPC would fail.
run 2 NEXAR_CUDA_IPC=require
every_rank ipc_calls
# Buffers from the CUDA virtual-memory API (cuMemCreate with a POSIX file
# descriptor handle, as PyTorch's expandable segments allocate): IPC too,
# each buffer exported as a descriptor its peers take with pidfd_getfd.
# Where the ptrace rules refuse that (the program says so) the calls take
# the ring through host memory; the results are checked either way.
vmm_run() {  # vmm_run NP
    run "$1" -- --vmm --quick
    local line
    line=$(grep -a -m1 '^vmm: ' "$log") || fail "--vmm: the program did not say whether descriptors can be taken"
    echo "$line"
    case $line in
        *"IPC expected"*) every_rank ipc_calls ;;
        *) echo "(virtual-memory-API buffers: IPC not checked on this machine)" ;;
    esac
}
vmm_run 2
vmm_run 4
# The staged path, IPC off.
run 2 NEXAR_CUDA_IPC=0 NEXAR_CUDA_PATH=staged
run 4 NEXAR_CUDA_IPC=0 NEXAR_CUDA_PATH=staged NEXAR_SEGMENT_BYTES=256K
run 2 NEXAR_CUDA_IPC=0 NEXAR_CUDA_PATH=auto NEXAR_PIPELINE_DEPTH=2
# The stage profile: results stay exact, and every rank prints its line.
run 2 NEXAR_CUDA_IPC=0 NEXAR_CUDA_PATH=staged NEXAR_GPU_PROFILE=1
[ "$(grep -ac '^nexar: rank [0-9]*: gpu_stages calls=[1-9]' "$log")" = 2 ] ||
    fail "NEXAR_GPU_PROFILE=1: expected a gpu_stages line from each of the 2 ranks"
run 2 NEXAR_HOST_BUFFERS=1 -- --mixed
# Host ranks cannot take the ring: all fall back, device ranks stage through host.
min_ring=0 run 2 NEXAR_HOST_BUFFERS=0 -- --mixed --no-ring
if [ "$rehearsal" = 1 ] || ucx_info -d 2>/dev/null | grep -aq "cuda_copy"; then
    direct_runs
else
    echo "(direct path not run: this UCX has no CUDA support; ucx_info -d lists no cuda_copy)"
fi
echo "all GPU MPI runs passed"
