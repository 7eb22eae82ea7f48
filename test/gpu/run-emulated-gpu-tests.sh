#!/bin/bash
# The dispatcher's device-buffer paths without a GPU: libnexar_pmpi loads
# the host-emulated GPU plugin (test/gpu/emulated_gpu_plugin.cc) in place of
# the CUDA one, and allreduce_cuda_check --emulated-gpu allocates its
# "device" buffers there.  Every collective takes the staged device path
# (the emulated GPU's copies and reductions complete late, on threads of
# their own, so a missing wait shows as a wrong result); with ranks mixing
# host and device memory; and with the ring refused, where device ranks
# stage through host memory for MPI.  Never skipped.
set -u
. "$(dirname "$0")/../lib.sh"
prog="$NEXAR_BUILDDIR/test/gpu/allreduce_cuda_check"
export NEXAR_EMULATED_GPU_PLUGIN="$NEXAR_BUILDDIR/test/gpu/.libs/libnexar_emulated_gpu.so"
[ -f "$NEXAR_EMULATED_GPU_PLUGIN" ] || fail "the emulated GPU plugin was not built: $NEXAR_EMULATED_GPU_PLUGIN"
new_log
export NEXAR_THRESHOLD_BYTES=0 NEXAR_STATS=1 NEXAR_LOG=info

run() {  # run NP VAR=VALUE... [-- ARGS]
    local np=$1; shift
    local envs=() args=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    [ $# -gt 0 ] && { shift; args=("$@"); }
    echo "== $np ranks ${envs[*]:-} --emulated-gpu --quick ${args[*]:-}"
    env "${envs[@]}" bash -c 'source "$0"; nexar_mpirun "$@"' "$(dirname "$0")/../lib.sh" "$np" "$prog" \
        --emulated-gpu --quick "${args[@]}" >"$log" 2>&1
    local rc=$?
    grep -av '^nexar: rank\|^\[nexar' "$log" | tail -n 20
    [ $rc = 0 ] || { tail -n 40 "$log"; fail "allreduce_cuda_check --emulated-gpu at $np ranks exited with $rc"; }
    grep -aq 'device buffers: staged through pinned host memory' "$log" || fail "nexar did not load the emulated GPU"
    check_stats "$log" "$np" "$min_ring"
}

# every_rank FIELD: each rank's FIELD (NEXAR_STATS) is above zero.
every_rank() {
    local v
    read_stats "$log" "$1"
    for v in "${values[@]}"; do [ "$v" -gt 0 ] || fail "$1=$v on a rank: expected calls there"; done
}

min_ring=1
run 2 NEXAR_CUDA_PATH=staged
every_rank reduce_scatter_calls
every_rank allgather_calls
run 3 NEXAR_CUDA_PATH=staged NEXAR_SEGMENT_BYTES=256K
every_rank reduce_scatter_calls
every_rank allgather_calls
# Host ranks beside device ranks: the ring takes both kinds.
run 2 NEXAR_HOST_BUFFERS=1 -- --mixed
# Host ranks cannot take the ring: all fall back, device ranks stage through host.
min_ring=0 run 2 NEXAR_HOST_BUFFERS=0 -- --mixed --no-ring
every_rank fallback_calls
echo "all emulated-GPU MPI runs passed"
