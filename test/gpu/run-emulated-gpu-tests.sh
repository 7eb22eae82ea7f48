#!/bin/bash
# The dispatcher's device-buffer paths without a GPU: libnexar_pmpi loads
# the host-emulated GPU plugin (test/gpu/emulated_gpu_plugin.cc) in place of
# the CUDA one, and allreduce_cuda_check --emulated-gpu allocates its
# "device" buffers there (shared mappings that the other ranks open through
# the emulated IPC).  Allreduces go GPU to GPU through IPC at 2-4 ranks;
# every collective takes the staged device path with IPC off or refused by
# one rank (the emulated GPU's copies and reductions complete late, on
# threads of their own, so a missing wait shows as a wrong result); ranks
# mix host and device memory; and with the ring refused, device ranks
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
    grep -aq 'device buffers: \(staged through pinned host memory\|direct (CUDA-aware UCX)\|direct (CUDA-aware MPI)\) path\|NEXAR_CUDA_PATH=direct, but' "$log" ||
        fail "nexar did not load the emulated GPU"
    check_stats "$log" "$np" "$min_ring"
}

# every_rank FIELD: each rank's FIELD (NEXAR_STATS) is above zero.
every_rank() {
    local v
    read_stats "$log" "$1"
    for v in "${values[@]}"; do [ "$v" -gt 0 ] || fail "$1=$v on a rank: expected calls there"; done
}

# no_rank FIELD: each rank's FIELD (NEXAR_STATS) is zero.
no_rank() {
    local v
    read_stats "$log" "$1"
    for v in "${values[@]}"; do [ "$v" = 0 ] || fail "$1=$v on a rank: expected none"; done
}

# fallbacks_below_floor: the run's fallbacks (fallback_calls, all ranks)
# are exactly its nonblocking device calls below 4 KiB: on one node such
# a call meets on the boards (every rank alike, whatever its buffers) and
# then goes to the MPI, staged, where the one-shot cannot take it (the run
# has NEXAR_LOG=trace, which names each fallback's reason).
fallbacks_below_floor() {
    local v total=0 below others
    read_stats "$log" fallback_calls
    for v in "${values[@]}"; do total=$((total + v)); done
    below=$(grep -ac "goes to the MPI: below the nonblocking calls' floor" "$log")
    others=$(grep -a "goes to the MPI: " "$log" | grep -avc "below the nonblocking calls' floor")
    [ "$others" = 0 ] || fail "fallbacks for another reason: $(grep -a "goes to the MPI: " "$log" | grep -av "below the nonblocking" | head -n 3)"
    [ "$below" = "$total" ] || fail "fallback_calls add up to $total, but $below calls below the floor went to the MPI"
    [ "$total" -gt 0 ] || fail "no nonblocking call below the floor went to the MPI (the run makes some)"
}

min_ring=1
# One node, device buffers everywhere: allreduces, reduce-scatters and
# allgathers go GPU to GPU through IPC (algo/ipc_allreduce.h).  Every call
# of the quick run took it: 4 ops x 7 types x 3 counts allreduces,
# 2 x 2 x 2 x 2 reduce-scatters (block and uneven, in place and not) and
# 2 x 2 x 2 allgathers: 84 + 16 + 8.
for np in 2 3 4; do
    run $np
    read_stats "$log" ipc_calls
    for v in "${values[@]}"; do [ "$v" = 108 ] || fail "ipc_calls=$v on a rank: expected 108 (every call)"; done
    every_rank reduce_scatter_calls
    grep -aq "device buffers go GPU to GPU through IPC ($np ranks on one node)" "$log" ||
        fail "NEXAR_LOG=info did not say the allreduces went through IPC"
done
# Memory exported as descriptors (the CUDA virtual-memory API's, as
# PyTorch's expandable segments allocate; the emulated GPU's
# alloc_fd_memory): peers take them with pidfd_getfd, which the set-up
# probed; on every rank, or on one rank only (the agreement says a
# descriptor is in the call).
# Where the ptrace rules forbid it (a user's job under Yama's
# ptrace_scope=1) the set-up says so and such calls take the staged ring.
for who in "" "--vmm-rank 1"; do
    run 3 -- --vmm $who
    if grep -aq "IPC without memory exported as descriptors" "$log"; then
        echo "(the ranks may not take each other's descriptors here: such calls took the staged ring)"
        no_rank ipc_calls
    else
        every_rank ipc_calls
    fi
done
# One rank cannot open descriptor memory (the emulated GPU refuses as
# pidfd_getfd would): the set-up's probe finds it, descriptor calls take
# the staged ring on every rank, agreed, with the reason; other memory
# still takes IPC.
run 3 NEXAR_EMULATED_GPU_REFUSE_FD_RANK=2 -- --vmm
no_rank ipc_calls
grep -aq "nexar\[rank 2\]: communicator context 1: IPC without memory exported as descriptors (the virtual-memory API's: it takes the device ring without IPC): opening rank 0's device memory" "$log" ||
    fail "NEXAR_LOG=info did not say why descriptor memory could not take IPC"
run 3 NEXAR_EMULATED_GPU_REFUSE_FD_RANK=2
every_rank ipc_calls
# NEXAR_CUDA_IPC=require: where IPC works, as by default...
run 2 NEXAR_CUDA_IPC=require
every_rank ipc_calls
# ...and where one rank's driver refuses it, every rank's device allreduce
# fails at once (MPI_ERR_OTHER) with the reason, rather than take the
# staged ring.
echo "== 2 ranks, NEXAR_CUDA_IPC=require, rank 1's driver refuses IPC"
start=$(date +%s)
env NEXAR_TEST_TIMEOUT=60 NEXAR_CUDA_IPC=require NEXAR_EMULATED_GPU_REFUSE_IPC_RANK=1 \
    bash -c 'source "$0"; nexar_mpirun "$@"' "$(dirname "$0")/../lib.sh" 2 "$prog" \
    --emulated-gpu --fault ipc-require >"$log" 2>&1
rc=$?
took=$(($(date +%s) - start))
[ $rc = 0 ] || { tail -n 20 "$log"; fail "require: the job did not end normally after its refused calls (status $rc)"; }
grep -a 'fault_check\|NEXAR_CUDA_IPC=require' "$log" | head -n 3
check_fault_report "$log" ipc-require 0 "$took" 0
grep -aq "nexar\[rank 1\]: error: MPI_Allreduce .*NEXAR_CUDA_IPC=require, and this device allreduce cannot go GPU to GPU through IPC: a device buffer cannot be exported" "$log" ||
    fail "require: rank 1 did not say why its call could not take IPC"
grep -aq "nexar\[rank 0\]: error: MPI_Allreduce .*NEXAR_CUDA_IPC=require, .*another rank's buffers or GPU cannot" "$log" ||
    fail "require: rank 0 did not say that another rank could not take IPC"
# The staged ring for every collective: IPC turned off...
run 2 NEXAR_CUDA_IPC=0 NEXAR_CUDA_PATH=staged
no_rank ipc_calls
every_rank reduce_scatter_calls
every_rank allgather_calls
run 3 NEXAR_CUDA_IPC=0 NEXAR_CUDA_PATH=staged NEXAR_SEGMENT_BYTES=256K
no_rank ipc_calls
every_rank reduce_scatter_calls
every_rank allgather_calls
# The direct path: UCX moves device memory itself, as a UCX built with CUDA
# does (NEXAR_CUDA_PATH=auto takes it where UCX can).  The emulated GPU
# stands in for a CUDA-aware UCX with NEXAR_EMULATED_GPU_CUDA_AWARE_UCX=1
# (its memory is host memory, which UCX moves as such): every collective,
# blocking, nonblocking and persistent, every call's bytes moved by UCX
# from device buffer to device buffer (direct_calls; 108 calls of the quick
# run, as above, 112 with the nonblocking ones).
direct=(NEXAR_CUDA_IPC=0 NEXAR_EMULATED_GPU_CUDA_AWARE_UCX=1)
direct_every_call() {  # direct_every_call N: each rank's direct_calls is N
    local v
    [ "$(grep -ac 'device buffers: direct (CUDA-aware UCX) path' "$log")" = "$np_direct" ] ||
        fail "not every rank said it takes the direct path"
    read_stats "$log" direct_calls
    for v in "${values[@]}"; do [ "$v" = "$1" ] || fail "direct_calls=$v on a rank: expected $1 (every device call)"; done
}
np_direct=2 run 2 "${direct[@]}"
np_direct=2 direct_every_call 108
np_direct=3 run 3 "${direct[@]}" NEXAR_SEGMENT_BYTES=256K
np_direct=3 direct_every_call 108
every_rank reduce_scatter_calls
every_rank allgather_calls
np_direct=2 run 2 "${direct[@]}" -- --nonblocking
np_direct=2 direct_every_call 112
np_direct=2 run 2 "${direct[@]}" -- --persistent
read_stats "$log" direct_calls
for v in "${values[@]}"; do [ "$v" -ge 112 ] || fail "persistent: direct_calls=$v, expected every call's"; done
# A rank whose UCX moves device memory beside one whose UCX does not (each
# rank's engine is its own: UCX takes device memory on one side, pinned
# host memory on the other).
echo "== 2 ranks, rank 0 over a CUDA-aware UCX, rank 1 staged"
# (The setting of one rank only through env as its program: Open MPI 5's
# -x reaches every context of an MPMD job.)
NEXAR_CUDA_IPC=0 nexar_mpirun 1 env NEXAR_EMULATED_GPU_CUDA_AWARE_UCX=1 "$prog" --emulated-gpu --quick \
    : -np 1 "$prog" --emulated-gpu --quick >"$log" 2>&1 ||
    { tail -n 30 "$log"; fail "a direct rank beside a staged one failed"; }
grep -a 'failures=' "$log"
read_stats "$log" direct_calls 0
[ "${values[0]}" = 108 ] || fail "rank 0 (CUDA-aware UCX): direct_calls=${values[0]}, expected 108"
read_stats "$log" direct_calls 1
[ "${values[0]}" = 0 ] || fail "rank 1 (staged): direct_calls=${values[0]}, expected 0"
# NEXAR_CUDA_PATH=direct over a UCX that cannot move device memory: said
# once per rank, and device buffers go to the MPI, staged through host memory.
run 2 NEXAR_CUDA_IPC=0 NEXAR_CUDA_PATH=direct
[ "$(grep -ac "warning: NEXAR_CUDA_PATH=direct, but this UCX cannot move CUDA memory; device buffers pass through to MPI" "$log")" = 2 ] ||
    fail "NEXAR_CUDA_PATH=direct over a UCX without CUDA: no warning on each rank"
no_rank direct_calls
every_rank staged_calls
# ...or refused by one rank's driver: every rank takes the staged ring, agreed.
run 3 NEXAR_EMULATED_GPU_REFUSE_IPC_RANK=1
no_rank ipc_calls
grep -aq "nexar\[rank 1\]: communicator context 1: a device send buffer cannot be exported through IPC" "$log" ||
    fail "NEXAR_LOG=info did not say why rank 1 could not take IPC"
# ...or, at set-up, one rank cannot open the others' memory (a container
# that forbids IPC): the context stays on the staged ring for good.
run 2 NEXAR_EMULATED_GPU_REFUSE_OPEN_RANK=0
no_rank ipc_calls
grep -aq "no IPC for device buffers (opening rank 1's device memory" "$log" ||
    fail "NEXAR_LOG=info did not say why IPC could not be set up"
# UCX that cannot start: IPC needs none, every device call of one node
# still goes GPU to GPU; where one rank refuses IPC the device ring would
# need UCX, so every call goes to the MPI on every rank, staged, exactly.
run 2 NEXAR_UCX_TLS=nosuchtl
read_stats "$log" ipc_calls
for v in "${values[@]}"; do [ "$v" = 108 ] || fail "ipc_calls=$v on a rank without UCX: expected 108 (every call)"; done
no_rank ucx_bytes
# (The program's few host-buffer calls take shared memory.  2 ranks: at 3,
# MPICH 4.0.2's own in-place MPI_Reduce_scatter, which every call reaches
# here, fails an internal assertion: a known defect of that MPI.)
run 2 NEXAR_UCX_TLS=nosuchtl NEXAR_EMULATED_GPU_REFUSE_IPC_RANK=1
no_rank ipc_calls
no_rank ucx_bytes
every_rank fallback_calls
every_rank staged_calls
check_same_paths "$log"
# The ring over the MPI's point-to-point (NEXAR_NET=mpi, every hop off
# shared memory): device buffers staged through host memory for an MPI
# that does not know CUDA (the trap fails any device buffer that reaches
# PMPI_Isend or PMPI_Irecv), handed to it as they are where it says it
# does (the stand-in NEXAR_EMULATED_GPU_CUDA_AWARE_MPI=1).
run 2 NEXAR_NET=mpi NEXAR_SHM=0 NEXAR_CUDA_IPC=0
every_rank mpi_bytes
no_rank ucx_bytes
no_rank direct_calls
run 3 NEXAR_NET=mpi NEXAR_SHM=0 NEXAR_CUDA_IPC=0 NEXAR_EMULATED_GPU_CUDA_AWARE_MPI=1
[ "$(grep -ac 'device buffers: direct (CUDA-aware MPI) path' "$log")" = 3 ] || fail "not every rank said the direct path over the MPI"
every_rank mpi_bytes
every_rank direct_calls
no_rank staged_calls
# Host ranks beside device ranks: the ring takes both kinds.
run 2 NEXAR_HOST_BUFFERS=1 -- --mixed
no_rank ipc_calls
# Host ranks cannot take the ring: all fall back, device ranks stage through host.
min_ring=0 run 2 NEXAR_HOST_BUFFERS=0 -- --mixed --no-ring
every_rank fallback_calls
read_stats "$log" staged_calls 0
[ "${values[0]}" -gt 0 ] || fail "rank 0 (device buffers) staged no call for the MPI"
read_stats "$log" staged_calls 1
[ "${values[0]}" = 0 ] || fail "rank 1 (host buffers) staged $values calls"
# A GPU job as users run it, with no setting (NEXAR_THRESHOLD_BYTES=auto),
# on an MPI that does not know CUDA (the test's trap fails any device
# buffer that reaches it, test/gpu/mpi_device_trap.h): device buffers of
# every size are right, the small ones handed to the MPI staged through
# host memory.
run 2 NEXAR_THRESHOLD_BYTES=auto
every_rank staged_calls
# ...and its log says once what the job gets.
[ "$(grep -ac "a job with a GPU: " "$log")" = 1 ] || fail "NEXAR_LOG=info did not say once what a GPU job gets"
grep -aq "nexar\[rank 0\]: a job with a GPU: host and device buffers learnt apart, .*device ring (staged through pinned host memory), GPU to GPU through IPC.*staged through host memory (it does not know CUDA)" "$log" ||
    fail "NEXAR_LOG=info's line on what a GPU job gets is not as expected: $(grep -a "a job with a GPU" "$log")"
# Each collective at whole vectors of 4 B, 1 KiB, 64 KiB, 1 MiB and 16 MiB,
# blocking and nonblocking: right, and no device buffer reached the MPI...
run 2 NEXAR_THRESHOLD_BYTES=auto -- --sizes
run 2 NEXAR_THRESHOLD_BYTES=auto -- --sizes --nonblocking
# ...which the trap would have said: with nexar off, the MPI gets them.
echo "== 2 ranks NEXAR_ENABLE=0 --emulated-gpu --quick --sizes (must fail: the trap)"
env NEXAR_ENABLE=0 bash -c 'source "$0"; nexar_mpirun "$@"' "$(dirname "$0")/../lib.sh" 2 "$prog" --emulated-gpu \
    --quick --sizes >"$log" 2>&1 && fail "with NEXAR_ENABLE=0 the trap let device buffers reach the MPI"
grep -aq "FAIL rank [01]: a device buffer reached PMPI_Allreduce of an MPI that does not know CUDA" "$log" ||
    { tail -n 20 "$log"; fail "with NEXAR_ENABLE=0 the run failed, but not by the trap"; }
# Nonblocking device calls from 4 KiB take nexar's staged device ring (over
# UCX: no blocking call set IPC up), several in flight at once on the
# communicator (each waits for its turn on its ring); the small ones meet
# on the boards, then go to the MPI, staged for it on the device ranks
# (fallbacks_below_floor).  Two GPUs, one per rank
# as on most GPU nodes: rank 1's calls run on GPU 1, also when nexar's
# progress thread moves them (the test computes before each completion
# call), and the emulated GPU fails a kernel launched from a thread whose
# current GPU is another.
run 2 NEXAR_THRESHOLD_BYTES=auto NEXAR_EMULATED_GPU_DEVICES=2 NEXAR_LOG=trace -- --nonblocking
every_rank ucx_bytes
every_rank staged_calls
fallbacks_below_floor
# Once a blocking call set IPC up, nonblocking calls take it too: every
# call, four in flight at once among them (2 and 3 ranks, one GPU each).
run 2 NEXAR_EMULATED_GPU_DEVICES=2 -- --nonblocking --ipc-first
read_stats "$log" ipc_calls
for v in "${values[@]}"; do [ "$v" = 113 ] || fail "ipc_calls=$v on a rank: expected 113 (every call)"; done
run 3 NEXAR_EMULATED_GPU_DEVICES=3 -- --nonblocking --ipc-first
read_stats "$log" ipc_calls
for v in "${values[@]}"; do [ "$v" = 113 ] || fail "ipc_calls=$v on a rank: expected 113 (every call)"; done
# ...and without IPC, the staged device ring at 3 ranks, the reduce-scatter
# out of place among them (its partial sums in GPU work memory taken at
# its ring's turn).
run 3 NEXAR_CUDA_IPC=0 NEXAR_EMULATED_GPU_DEVICES=2 -- --nonblocking
no_rank ipc_calls
no_rank fallback_calls
run 2 NEXAR_THRESHOLD_BYTES=auto -- --mixed --nonblocking
read_stats "$log" staged_calls 0
[ "${values[0]}" -gt 0 ] || fail "rank 0 (device buffers) staged no nonblocking call for the MPI"
# Persistent device calls from 4 KiB take IPC at each start (their
# initialization set it up: 56 such allreduces, started twice); those
# nexar does not run (the small ones) cannot be the MPI's own persistent
# call there: each start posts the MPI's nonblocking call, staged on the
# device ranks.
run 2 NEXAR_THRESHOLD_BYTES=auto NEXAR_EMULATED_GPU_DEVICES=2 -- --persistent
read_stats "$log" ipc_calls
for v in "${values[@]}"; do [ "$v" -ge 112 ] || fail "ipc_calls=$v on a rank: expected every start through IPC"; done
every_rank staged_calls
# They are learnt as host buffers are: the first agreement that finds every
# rank's buffers on the device moves its size to the device's class, whose
# trials time nexar against the MPI's path (staged) and settle.
run 2 NEXAR_THRESHOLD_BYTES=auto NEXAR_LOG=debug -- --learn 40
grep -aq "nexar\[rank 0\]: communicator context 1: MPI_Allreduce of 4KiB: every rank's buffers are device memory now" "$log" ||
    fail "NEXAR_LOG=debug did not say that 4 KiB allreduces moved to the device's class"
for size in 4KiB 256KiB 4MiB; do
    grep -a "nexar\[rank 0\]: .*MPI_Allreduce out of place from $size on device buffers: " "$log" | tail -n 1 |
        grep . || fail "the $size device allreduces settled on no path (NEXAR_LOG=debug)"
done
every_rank staged_calls
# Host ranks beside device ranks, with no setting: the kinds never agree, so
# each size stays in the host buffers' class (and is learnt there); every
# result is right on both paths.
run 2 NEXAR_THRESHOLD_BYTES=auto NEXAR_LOG=debug -- --mixed --learn 24
! grep -aq "device memory now" "$log" || fail "mixed host and device ranks moved a size to the device's class"
grep -aq "nexar\[rank 0\]: .*MPI_Allreduce out of place from 256KiB on host buffers: " "$log" ||
    fail "the mixed 256 KiB allreduces were not learnt in the host buffers' class"
# A peer that dies or stops in the middle of a device allreduce: rank 0
# gets an error (MPI_ERR_OTHER) within NEXAR_TIMEOUT_S, then aborts the job.
# Blocking, nonblocking (completed after computation) and persistent
# calls through IPC; nonblocking and persistent ones on the staged device
# ring (IPC off; the victim stops at its first reduction on the GPU).  On
# MPICH only the stopped peer (MPICH ends the job itself when one dies).
faults="kill stop"
[ "$NEXAR_MPI_FAMILY" = mpich ] && faults="stop"
# device_fault MODE FAULT WHAT [VAR=VALUE...] -- ARGS: WHAT is in rank 0's error.
device_fault() {
    local mode=$1 fault=$2 what=$3 envs=() start
    shift 3
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    timeout_s=3 fault_label="$NEXAR_MPI_LAUNCHER $mode${*:+ $*}/node"
    start=$(date +%s)
    echo "== 2 ranks, rank 1 ${fault}s in the middle of a device allreduce: $mode ${envs[*]} $*"
    env NEXAR_TEST_TIMEOUT=60 NEXAR_TIMEOUT_S=$timeout_s NEXAR_EMULATED_GPU_FAULT=$fault \
        NEXAR_EMULATED_GPU_FAULT_RANK=1 "${envs[@]}" \
        bash -c 'source "$0"; nexar_mpirun "$@"' "$(dirname "$0")/../lib.sh" 2 --keep-going "$prog" \
        --emulated-gpu --fault "$mode" "$@" >"$log" 2>&1
    check_device_fault "$log" "$mode" "$timeout_s" $(($(date +%s) - start)) "$what"
}
for fault in $faults; do
    for form in "" --nonblocking --persistent; do
        device_fault "ipc-$fault" $fault "an IPC allreduce" -- $form
    done
    # (A killed peer is seen at once: the ring's receive side watches its
    # process, and UCX may fail a send to it first; a stopped one by the
    # timeout.)
    # A persistent ring waits for a peer it has not heard from yet (a late
    # start is legal), so a peer that stops before its first segment went
    # out would be waited for: the stopped peer is tested nonblocking only.
    what="waiting on rank 1" forms=--nonblocking
    [ $fault = kill ] && forms="--nonblocking --persistent" &&
        what="rank 1 (process [0-9]*) has exited\|\(sending to\|send to\|receive from\|connection to\) rank 1 failed"
    for form in $forms; do
        device_fault "ring-$fault" $fault "$what" NEXAR_CUDA_IPC=0 NEXAR_EMULATED_GPU_FAULT_AT=kernel -- $form
    done
done
echo "all emulated-GPU MPI runs passed"
