#!/bin/bash
# nexar on a UCX built with CUDA (scripts/cuda-ucx.sh: UCX 1.20.1, as GPU
# clusters have it), through LD_LIBRARY_PATH, nexar built against the
# system's UCX and unchanged (run-cluster-tests.sh runs the same across two
# simulated nodes):
#   - nexar-info runs on it and says what it moves: CUDA memory where a GPU
#     and its driver are (device_path: direct), else not (staged);
#   - every collective on host buffers with every byte through UCX
#     (NEXAR_SHM=0), exact, every rank's log naming this UCX's version;
#   - the direct path's choice on it: device buffers of the emulated GPU
#     take the staged path where UCX finds no driver (as here), and the
#     direct path, every call, where the emulated GPU stands in for memory
#     this UCX moves (NEXAR_EMULATED_GPU_CUDA_AWARE_UCX=1).
# Skipped (77) where no such UCX can be had, except under
# NEXAR_REQUIRE_ALL_LANES=1 (CI), where that fails.
set -u
. "$(dirname "$0")/../lib.sh"
new_log
if ! ucx=$("$(dirname "$0")/../../scripts/cuda-ucx.sh" --prefix 2>"$log"); then
    [ "${NEXAR_REQUIRE_ALL_LANES:-0}" = 1 ] && fail "no UCX with CUDA: $(cat "$log")"
    echo "SKIP: no UCX with CUDA: $(cat "$log")"
    exit 77
fi
export LD_LIBRARY_PATH="$ucx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" UCX_MODULE_DIR="$ucx/lib/ucx"
version=$("$ucx/bin/ucx_info" -v | sed -n 's/.*[Ll]ibrary version: *\([0-9.]*\).*/\1/p')
[ -n "$version" ] || fail "$ucx/bin/ucx_info -v gives no version"
echo "UCX $version with CUDA in $ucx"

info=$("$NEXAR_BUILDDIR/nexar-info" -p) || fail "nexar-info does not run on UCX $version"
echo "$info" | grep -E '^(ucx_version|ucx_moves_cuda|gpu|device_path)='
echo "$info" | grep -qx "ucx_version=$version" || fail "nexar-info does not run on UCX $version"
# A GPU as nexar sees it (its CUDA plugin and a driver), not nvidia-smi.
gpu=0
echo "$info" | grep -q '^gpu=yes' && gpu=1
if [ $gpu = 1 ]; then
    echo "$info" | grep -q '^ucx_moves_cuda=yes' || fail "a GPU is here, but UCX $version does not move CUDA memory"
    echo "$info" | grep -qx 'device_path=direct (CUDA-aware UCX)' || fail "a GPU is here, but device buffers would not take the direct path"
else
    echo "$info" | grep -q "^ucx_moves_cuda=no: UCX $version lists no CUDA memory type" ||
        fail "without a GPU, nexar-info should say UCX moves no CUDA memory"
fi

export NEXAR_STATS=1 NEXAR_LOG=info NEXAR_THRESHOLD_BYTES=0
# run NP WHAT [VAR=VALUE...] -- PROGRAM ARGS...: one job on this UCX.
run() {
    local np=$1 what=$2; shift 2
    echo "== $what, $np ranks: $*"
    nexar_mpirun_env "$np" "$@" >"$log" 2>&1
    local rc=$?
    grep -av '^nexar' "$log" | tail -n 5
    [ $rc = 0 ] || { tail -n 30 "$log"; fail "$what exited with $rc"; }
    [ "$(grep -ac "^nexar\[rank [0-9]*\]: UCX $version up" "$log")" = "$np" ] ||
        fail "not every rank ran on UCX $version: $(grep -a 'UCX .* up\|UCX could not' "$log" | head -n 2)"
    check_stats "$log" "$np" 1
}
for coll in allreduce reduce_scatter allgather; do
    run 2 "$coll, every byte through UCX" NEXAR_HOST_BUFFERS=1 NEXAR_SHM=0 -- "$NEXAR_BUILDDIR/test/mpi/allreduce_check" \
        --collective $coll --cases 60 --max-count 20000 --big-every 20 --seed 61
    check_bytes "$log" ucx_bytes nonzero
    check_bytes "$log" shm_bytes zero
done

plugin="$NEXAR_BUILDDIR/test/gpu/.libs/libnexar_emulated_gpu.so"
[ -f "$plugin" ] || fail "the emulated GPU plugin was not built: $plugin"
gpu_prog="$NEXAR_BUILDDIR/test/gpu/allreduce_cuda_check"
if [ $gpu = 0 ]; then
    run 2 "device buffers, no driver for UCX's CUDA transport" NEXAR_EMULATED_GPU_PLUGIN="$plugin" NEXAR_CUDA_IPC=0 -- \
        "$gpu_prog" --emulated-gpu --quick
    [ "$(grep -ac 'device buffers: staged through pinned host memory path' "$log")" = 2 ] ||
        fail "without a driver, device buffers should take the staged path"
    check_bytes "$log" direct_calls zero
fi
run 3 "device buffers, UCX moving them itself" NEXAR_EMULATED_GPU_PLUGIN="$plugin" NEXAR_CUDA_IPC=0 \
    NEXAR_EMULATED_GPU_CUDA_AWARE_UCX=1 -- "$gpu_prog" --emulated-gpu --quick
[ "$(grep -ac 'device buffers: direct (CUDA-aware UCX) path' "$log")" = 3 ] || fail "not every rank took the direct path"
read_stats "$log" direct_calls
for v in "${values[@]}"; do [ "$v" = 108 ] || fail "direct_calls=$v on a rank: expected 108 (every device call)"; done
echo "PASS: nexar on UCX $version"
