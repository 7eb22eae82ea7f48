#!/bin/bash
# MPI correctness at 2, 3, 4 and 5 ranks (oversubscribed on small machines):
# every eligible allreduce goes to the ring (threshold 0, host buffers on),
# results are compared with PMPI_Allreduce and a local reference, and the
# NEXAR_STATS lines must show that the ring ran on every rank.  Ranks of one
# node take the shared-memory ring by default; NEXAR_SHM=0 runs check the
# UCX ring that ranks on different nodes use, NEXAR_NET=mpi the ring over
# the MPI's own point-to-point.  Where UCX does not run (a build
# --without-ucx: its own lane, scripts/mpi-lane.sh no-ucx), the NEXAR_SHM=0
# runs take the MPI's point-to-point, and with NEXAR_NET=ucx every such
# call goes to the MPI, exactly, on every rank.
set -u
. "$(dirname "$0")/../lib.sh"
prog="$NEXAR_BUILDDIR/test/mpi/allreduce_check"
new_log
export NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=0 NEXAR_STATS=1 NEXAR_LOG=info

ucx_here=1
ucx_runs_here || ucx_here=0
[ $ucx_here = 1 ] || echo "# UCX does not run here ($("$NEXAR_BUILDDIR/nexar-info" -p | sed -n 's/^ucx=//p')): rings that need it must go to the MPI"
run() {  # run NP [env...] -- ARGS...
    local np=$1; shift
    local envs=() none=() path=${path:-}
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    # Without UCX a hop off shared memory takes the MPI's point-to-point,
    # unless NEXAR_NET=ucx: then the call goes to the MPI.
    if [ "$path" = ucx ] && [ $ucx_here = 0 ]; then
        case " ${envs[*]:-} " in *" NEXAR_NET=ucx "*) none=(--expect-ring 0) ;; *) path=mpi ;; esac
    fi
    echo "== $np ranks ${envs[*]:-} $* ${none[*]:-}"
    env "${envs[@]}" bash -c 'source "$0"; nexar_mpirun "$@"' "$(dirname "$0")/../lib.sh" "$np" ${wrap:-} "$prog" "$@" "${none[@]}" >"$log" 2>&1
    local rc=$?
    grep -av '^nexar: rank' "$log" | tail -n 20
    [ $rc = 0 ] || fail "allreduce_check at $np ranks exited with $rc"
    if [ ${#none[@]} -gt 0 ]; then
        check_stats "$log" "$np" 0
        check_bytes "$log" fallback_calls nonzero
        return 0
    fi
    check_stats "$log" "$np" "$min_ring"
    # Which channels the ring took (path=shm or path=ucx before run): on
    # one node every hop is in shared memory unless NEXAR_SHM=0.
    case ${path:-} in
        shm) grep -aq "; $np of $np ring hops through shared memory" "$log" || fail "not every hop used shared memory"
             check_bytes "$log" shm_bytes nonzero; check_bytes "$log" ucx_bytes zero ;;
        ucx) grep -aq "ring hops through shared memory" "$log" && fail "NEXAR_SHM=0 still used shared memory"
             check_bytes "$log" shm_bytes zero; check_bytes "$log" ucx_bytes nonzero; check_bytes "$log" mpi_bytes zero ;;
        mpi) grep -aq "ring hops through shared memory" "$log" && fail "NEXAR_SHM=0 still used shared memory"
             check_bytes "$log" shm_bytes zero; check_bytes "$log" ucx_bytes zero; check_bytes "$log" mpi_bytes nonzero ;;
    esac
    return 0
}
min_ring=1
# Idle waits give their core away often only where the node holds more
# ranks than the CPUs they may run on (NEXAR_YIELD=auto, algo/ring.h).
check_yield() {  # check_yield RANKS SETTING
    local line ranks cpus
    line=$(grep -a "of the job's ranks on this machine, on" "$log")
    [ "$(printf '%s\n' "$line" | grep -c .)" = 1 ] || fail "not one line on how waits yield: $line"
    ranks=$(printf '%s\n' "$line" | sed 's/.*: \([0-9]*\) of the job.*/\1/')
    cpus=$(printf '%s\n' "$line" | sed 's/.* on \([0-9]*\) CPUs.*/\1/')
    [ "$ranks" = "$1" ] || fail "the yield line counts $ranks ranks on the machine, not $1: $line"
    case "$2:$((ranks > cpus))" in
        auto:1 | 1:*) printf '%s\n' "$line" | grep -q "give the core away" || fail "waits should yield: $line" ;;
        *) printf '%s\n' "$line" | grep -q "keep their core" || fail "waits should keep their core: $line" ;;
    esac
}

# More ranks than cores busy-poll against each other: fewer and smaller
# cases as the rank count grows.
# Small allreduces on one node take the one-shot (algo/one_shot.h) by
# default, larger ones the ring; runs that exercise the ring's segments on
# small vectors turn the one-shot off (NEXAR_ONE_SHOT_BYTES=0).
path=shm run 2 NEXAR_YIELD=auto -- --cases 400 --max-count 20000 --big-every 25 --seed 11
check_bytes "$log" one_shot_calls nonzero
check_yield 2 auto
# Each call's route, decided once after its agreement
# (CollectiveTask::decide_route), is the same on every rank, call by call.
path=shm run 2 NEXAR_LOG=trace -- --cases 60 --max-count 20000 --big-every 10 --seed 10
routes() { grep -a "^nexar\[rank $1\]: MPI_[A-Za-z_]* of [0-9]* bytes on communicator context [0-9]*: " "$log" | sed 's/^nexar\[rank [0-9]*\]: //'; }
ring_calls=$(grep -ao 'ring_calls(all ranks)=[0-9]*' "$log" | tail -n 1 | cut -d= -f2)
[ "$(( $(routes 0 | wc -l) * 2 ))" = "${ring_calls:-none}" ] ||
    fail "NEXAR_LOG=trace printed $(routes 0 | wc -l) routes on rank 0 for ${ring_calls:-no} ring calls of 2 ranks"
[ "$(routes 0)" = "$(routes 1)" ] || fail "the two ranks routed their calls differently"
routes 0 | grep -q "^MPI_Allreduce of .*: the one-shot$" || fail "no small allreduce took the one-shot"
routes 0 | grep -q ": the flat ring$" || fail "no large allreduce took the flat ring"
# One meeting per call (algo/one_shot.h, BoardMeeting): on one node every
# blocking call's agreement meets on the one-shot's boards, the one-shot's
# input with it, so each rank counts as many meetings as calls it agreed.
for r in 0 1; do
    line=$(grep -a "^nexar: rank $r: " "$log")
    field() { printf '%s\n' "$line" | grep -o " $1=[0-9]*" | cut -d= -f2; }
    [ "$(field board_agreements)" = "$(( $(field ring_calls) + $(field fallback_calls) ))" ] ||
        fail "rank $r: board_agreements=$(field board_agreements) for ring_calls=$(field ring_calls) fallback_calls=$(field fallback_calls)"
done
run 2 NEXAR_SEGMENT_BYTES=4K NEXAR_PIPELINE_DEPTH=2 NEXAR_ONE_SHOT_BYTES=0 -- --cases 120 --max-count 20000 --big-every 20 --seed 12
check_bytes "$log" one_shot_calls zero
check_bytes "$log" board_agreements zero  # no boards: the agreement is the MPI's reduction
run 3 NEXAR_YIELD=auto -- --cases 240 --max-count 5000 --big-every 60 --seed 13
check_bytes "$log" one_shot_calls nonzero
check_yield 3 auto
run 4 NEXAR_ONE_SHOT_BYTES=0 NEXAR_YIELD=1 -- --cases 200 --max-count 3000 --big-every 100 --seed 14
check_bytes "$log" one_shot_calls zero
check_yield 4 1
path=shm run 5 NEXAR_SEGMENT_BYTES=1K NEXAR_ONE_SHOT_BYTES=0 -- --cases 160 --max-count 2000 --big-every 0 --seed 15
# Same-node hops that pass segments by address, read by the receiver with
# CMA: both phases, and the allgather alone (NEXAR_SHM_COPY=mixed); and
# allgather segments written by the sender into the receiver's buffer
# (push).
path=shm run 2 NEXAR_SHM_COPY=cma -- --cases 200 --max-count 20000 --big-every 25 --seed 21
check_bytes "$log" cma_bytes nonzero
path=shm run 3 NEXAR_SHM_COPY=mixed NEXAR_SEGMENT_BYTES=4K NEXAR_ONE_SHOT_BYTES=0 -- --cases 120 --max-count 5000 --big-every 60 --seed 22
check_bytes "$log" cma_bytes nonzero
path=shm run 2 NEXAR_SHM_COPY=push NEXAR_SEGMENT_BYTES=8K -- --cases 200 --max-count 20000 --big-every 25 --seed 24
check_bytes "$log" push_bytes nonzero
path=shm run 3 NEXAR_SHM_COPY=push NEXAR_SEGMENT_BYTES=4K NEXAR_ONE_SHOT_BYTES=0 -- --cases 120 --max-count 5000 --big-every 60 --seed 25
check_bytes "$log" push_bytes nonzero
# A kernel that forbids CMA (ranks nobody may read: non-dumpable, and as
# root without CAP_SYS_PTRACE, as Yama's ptrace_scope or a container's
# seccomp profile would refuse): the probe fails, one line says so, and
# every segment goes through the slots.
# (MPICH runs on UCX, whose CMA transport would fail the same way: it
# keeps to its others.  MPICH cannot start in a process that is not
# dumpable, so allreduce_check turns it so only after MPI_Init; MPI_COMM_WORLD's
# ring, set up at MPI_Init for nonblocking calls, would have probed CMA
# before that: the run goes without nonblocking calls, so that the probe
# meets the kernel's refusal as it would from the start.)
wrap=""
[ "$(id -u)" = 0 ] && wrap="setpriv --bounding-set=-sys_ptrace --inh-caps=-sys_ptrace"
mpi_no_cma=()
[ "$NEXAR_MPI_FAMILY" = mpich ] && mpi_no_cma=(UCX_TLS=^cma NEXAR_NONBLOCKING=0)
wrap=$wrap path=shm run 2 NEXAR_SHM_COPY=push "${mpi_no_cma[@]}" -- --cases 80 --max-count 20000 --big-every 20 --seed 23 --dumpable 0
check_bytes "$log" cma_bytes zero
check_bytes "$log" push_bytes zero
[ "$(grep -ac "same-node hops copy through shared-memory slots only: cannot read a neighbour's memory with CMA: process_vm_readv is not permitted" "$log")" = 2 ] ||
    fail "the CMA refusal was not reported once per rank"
# UCX that cannot start (a transport that does not exist, for nexar's own
# context only): a node needs none, every hop takes shared memory.
path=shm run 2 NEXAR_UCX_TLS=nosuchtl -- --cases 120 --max-count 20000 --big-every 20 --seed 19
grep -aq "not needed on one node, nexar runs on shared memory" "$log" || fail "the log does not say that UCX is not needed"
check_same_paths "$log"
# A broken UCX: a library that is not UCX where libucp should be
# (NEXAR_LIBUCP): said once, and shared memory runs every call.
path=shm run 2 NEXAR_LIBUCP=libz.so.1 -- --cases 60 --max-count 20000 --big-every 20 --seed 20
[ $ucx_here = 0 ] || grep -aq "UCX not found (libz.so.1 has no ucp_get_version_string" "$log" ||
    fail "the log does not say that libz.so.1 is no UCX"
# The UCX ring on host buffers.
path=ucx run 2 NEXAR_SHM=0 -- --cases 300 --max-count 20000 --big-every 25 --seed 17
path=ucx run 3 NEXAR_SHM=0 NEXAR_SEGMENT_BYTES=4K -- --cases 160 --max-count 5000 --big-every 60 --seed 18
# The ring over the MPI's own point-to-point (the network where UCX does
# not run): every collective, segments small and large, 2 and 3 ranks.
path=mpi run 2 NEXAR_SHM=0 NEXAR_NET=mpi -- --cases 200 --max-count 20000 --big-every 25 --seed 51
path=mpi run 3 NEXAR_SHM=0 NEXAR_NET=mpi NEXAR_SEGMENT_BYTES=4K -- --cases 120 --max-count 5000 --big-every 40 --seed 52
path=mpi run 3 NEXAR_SHM=0 NEXAR_NET=mpi NEXAR_SEGMENT_BYTES=4K -- --collective reduce_scatter --cases 100 --max-count 4000 --big-every 40 --seed 53
path=mpi run 2 NEXAR_SHM=0 NEXAR_NET=mpi -- --collective reduce_scatter_block --cases 100 --max-count 20000 --big-every 25 --seed 54
path=mpi run 3 NEXAR_SHM=0 NEXAR_NET=mpi -- --collective allgather --cases 100 --max-count 4000 --big-every 40 --seed 55
# Where UCX does not run and NEXAR_NET=ucx, a ring that needs the network
# goes to the MPI on every rank.
[ $ucx_here = 1 ] || path=ucx run 2 NEXAR_SHM=0 NEXAR_NET=ucx -- --cases 60 --max-count 20000 --big-every 25 --seed 56
# The reduce-scatter (blocks, and uneven counts with empty blocks) and the
# allgather, against PMPI and the local reference, on both kinds of hop.
rs="--collective reduce_scatter_block" rsv="--collective reduce_scatter" ag="--collective allgather"
path=shm run 2 -- $rs --cases 160 --max-count 20000 --big-every 20 --seed 31
check_bytes "$log" reduce_scatter_calls nonzero
check_bytes "$log" fallback_calls zero
path=shm run 2 NEXAR_SHM_COPY=cma -- $rsv --cases 120 --max-count 20000 --big-every 20 --seed 37
check_bytes "$log" fallback_calls zero
path=shm run 3 NEXAR_SHM_COPY=cma -- $rs --cases 90 --max-count 4000 --big-every 30 --seed 38
check_bytes "$log" fallback_calls zero
path=shm run 3 NEXAR_SEGMENT_BYTES=4K -- $rsv --cases 120 --max-count 4000 --big-every 40 --seed 32
check_bytes "$log" reduce_scatter_calls nonzero
path=ucx run 4 NEXAR_SHM=0 -- $rsv --cases 100 --max-count 2000 --big-every 0 --seed 33
path=shm run 2 NEXAR_SHM_COPY=push -- $ag --cases 160 --max-count 20000 --big-every 20 --seed 34
check_bytes "$log" allgather_calls nonzero
check_bytes "$log" fallback_calls zero
check_bytes "$log" push_bytes nonzero
path=ucx run 3 NEXAR_SHM=0 -- $ag --cases 120 --max-count 4000 --big-every 40 --seed 35
path=shm run 5 NEXAR_SEGMENT_BYTES=1K -- $ag --cases 80 --max-count 1000 --big-every 0 --seed 36
check_bytes "$log" allgather_calls nonzero
# Results streamed past the cache (NEXAR_STREAM_BYTES=0: in every call,
# the last allgather step's segments out of their slots), at 2 ranks and at
# 3 (segments forwarded from place before the last step), with odd segment
# sizes.
path=shm run 2 NEXAR_STREAM_BYTES=0 NEXAR_SHM_COPY=slots -- --cases 120 --max-count 20000 --big-every 20 --seed 41
path=shm run 3 NEXAR_STREAM_BYTES=0 NEXAR_SHM_COPY=slots NEXAR_SEGMENT_BYTES=1000 -- $ag --cases 90 --max-count 4000 --big-every 30 --seed 42
path=shm run 2 NEXAR_STREAM_BYTES=0 -- $rsv --cases 80 --max-count 20000 --big-every 20 --seed 43
# An allgather out of place sends its own block from the send buffer and
# streams each segment into place as it leaves (by address here; push and
# UCX above, the slots copy the block first).
path=shm run 3 NEXAR_STREAM_BYTES=0 NEXAR_SHM_COPY=mixed NEXAR_SEGMENT_BYTES=4K -- $ag --cases 90 --max-count 4000 --big-every 30 --seed 44
check_bytes "$log" cma_bytes nonzero
# NEXAR_SHM_COPY=auto tries every candidate on calls of one shape, slots+own
# among them (slots with the own block copied along with the slot copy).
path=shm run 2 NEXAR_LOG=debug NEXAR_STREAM_BYTES=0 -- $ag --count 20000 --cases 200 --big-every 0 --seed 45
# (An untried choice reads 0.00 ms: the fifth must have a time.)
grep -ao "slots+own [0-9.]* ms)" "$log" | grep -avq "slots+own 0.00 ms)" ||
    fail "the copy chooser did not try slots+own for an allgather out of place"
# Everything passes through (threshold above every size): MPI's own results,
# nexar's 16-bit float ops inside PMPI_Allreduce, against the local reference.
min_ring=0 run 3 NEXAR_THRESHOLD_BYTES=1G -- --cases 120 --max-count 3000 --big-every 0 --seed 16 --expect-ring 0
# The known one-shot (call/known_one_shot.h): small allreduces that skip
# their task, exact against the MPI's own, and the calls whose ranks
# differ (in place on one rank only, counts that differ) through their
# tasks; with the fixed threshold they must take it, with the learnt one
# they may (the learner decides each size).
known="$NEXAR_BUILDDIR/test/mpi/known_check"
for np in 2 3; do
    echo "== known_check at $np ranks, NEXAR_THRESHOLD_BYTES=0"
    nexar_mpirun "$np" "$known" --expect-known >"$log" 2>&1 || { tail -n 20 "$log"; fail "known_check at $np ranks"; }
    grep -a "^known_check" "$log"
    check_stats "$log" "$np" 200
    check_same_paths "$log"
    [ "$(grep -ac "known_one_shots=[1-9]" "$log")" = "$np" ] || fail "known_check at $np ranks: a rank counted no known one-shot"
done
echo "== known_check at 2 ranks, learnt threshold"
NEXAR_THRESHOLD_BYTES=auto nexar_mpirun 2 "$known" >"$log" 2>&1 || { tail -n 20 "$log"; fail "known_check, learnt threshold"; }
grep -a "^known_check" "$log"
echo "== known_check at 2 ranks, NEXAR_THRESHOLD_BYTES=0 NEXAR_PROGRESS=calls"
NEXAR_PROGRESS=calls nexar_mpirun 2 "$known" --expect-known >"$log" 2>&1 ||
    { tail -n 20 "$log"; fail "known_check, NEXAR_PROGRESS=calls"; }
grep -a "^known_check" "$log"
echo "== known_check at 2 ranks, NEXAR_THRESHOLD_BYTES=4096: nonblocking calls below it go to the MPI on every rank"
NEXAR_THRESHOLD_BYTES=4096 nexar_mpirun 2 "$known" --fixed-threshold 4096 >"$log" 2>&1 ||
    { tail -n 20 "$log"; fail "known_check, fixed threshold"; }
grep -a "^known_check" "$log"
echo "all MPI runs passed"
