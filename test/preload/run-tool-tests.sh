#!/bin/bash
# nexar beside another PMPI tool: a stand-in profiler (stand_in_profiler.c)
# that wraps MPI_Init*, MPI_Finalize, MPI_Allreduce, MPI_Reduce_scatter_block
# and MPI_Allgather and calls PMPI_*.  Preloaded before nexar, after it, and
# with nexar linked (-lnexar_pmpi): the profiler counts every call, nexar's
# ring takes the large ones, and the results are exact.  Also: a tool that
# does not call PMPI_Allreduce (nexar says so once), MPI started without
# passing through nexar (nexar starts at the first call on MPI_COMM_WORLD),
# MPI_THREAD_MULTIPLE, and NEXAR_ENABLE=0 with the tool present.
set -u
. "$(dirname "$0")/../lib.sh"
plain="$NEXAR_BUILDDIR/test/preload/plain_allreduce"
linked="$NEXAR_BUILDDIR/test/preload/linked_allreduce"  # a libtool wrapper: it finds the uninstalled library
nexar="$NEXAR_BUILDDIR/.libs/libnexar_pmpi.so"
tool="$NEXAR_BUILDDIR/test/preload/.libs/libstand_in_profiler.so"
for f in "$nexar" "$tool" "$plain"; do [ -f "$f" ] || fail "$f not built"; done
grep -aq "libnexar_pmpi\.so" "$NEXAR_BUILDDIR"/test/preload/.libs/*linked_allreduce || fail "$linked must be linked with nexar"
new_log
np=2

# run LD_PRELOAD_VALUE PROGRAM RING_CALLS VAR=VALUE... [-- PROGRAM ARGS]
run() {
    local preload=$1 prog=$2 ring=$3; shift 3
    local envs=() args=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    [ $# -gt 0 ] && { shift; args=("$@"); }
    echo "== LD_PRELOAD=$(echo "$preload" | sed "s|$NEXAR_BUILDDIR/||g") $(basename "$prog") ${args[*]:-} ${envs[*]:-}"
    env "${envs[@]}" NEXAR_STATS=1 NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=1M \
        bash -c 'source "$0"; nexar_mpirun "$@"' "$(dirname "$0")/../lib.sh" \
        "$np" --rank-env LD_PRELOAD="$(preload_value "$preload")" "$prog" "${args[@]}" >"$log" 2>&1
    local rc=$?
    grep -av '^nexar: rank' "$log" | tail -n 8
    [ $rc = 0 ] || fail "exited with $rc"
    grep -aq "errors=0" "$log" || fail "wrong results"
    check_stats "$log" "$np" "$ring"
}

# every_rank_counted ALLREDUCES [REDUCE_SCATTERS ALLGATHERS]: the profiler saw
# MPI_Init once and every call, on every rank.
every_rank_counted() {
    local want="init=1 allreduce=$1 reduce_scatter_block=${2:-0} allgather=${3:-0}"
    [ "$(grep -ac "^profiler: rank [0-9]*: $want\$" "$log")" = "$np" ] ||
        fail "the profiler must count '$want' on each of the $np ranks: $(grep -a '^profiler:' "$log" | tr '\n' ' ')"
}

# 11 allreduces (9 large), then a reduce-scatter and an allgather (large).
run "$tool:$nexar" "$plain" 11 -- --halves
every_rank_counted 11 1 1
run "$nexar:$tool" "$plain" 11 -- --halves
every_rank_counted 11 1 1
run "$tool" "$linked" 11 -- --halves
every_rank_counted 11 1 1
run "$nexar:$tool" "$plain" 9 -- --thread-multiple
every_rank_counted 11
run "$tool:$nexar" "$plain" 9 -- --thread-multiple
every_rank_counted 11
# nexar switched off: the profiler still sees everything, the ring nothing.
run "$tool:$nexar" "$plain" 0 NEXAR_ENABLE=0 -- --halves
every_rank_counted 11 1 1
run "$nexar:$tool" "$plain" 0 NEXAR_ENABLE=0 -- --halves
every_rank_counted 11 1 1
# A tool after nexar that does not call PMPI_Allreduce hides the calls:
# nexar says so, once per rank, and naming the tool.
run "$nexar:$tool" "$plain" 0 PROFILER_SKIP_PMPI=1
every_rank_counted 11
[ "$(grep -ac "libstand_in_profiler.so, loaded after libnexar_pmpi, did not call PMPI_Allreduce" "$log")" = "$np" ] ||
    fail "expected one warning per rank about the tool that skips PMPI_Allreduce"
# The same tool before nexar: nexar sees every call through MPI_Allreduce.
run "$tool:$nexar" "$plain" 9 PROFILER_SKIP_PMPI=1
every_rank_counted 11
# MPI started without passing through nexar: it starts at the first call on
# MPI_COMM_WORLD, on every rank, and still prints its stats at the end.
run "$tool:$nexar" "$plain" 9 PROFILER_INIT_DIRECT=1 NEXAR_LOG=info
every_rank_counted 11
[ "$(grep -ac "started at the first collective call on MPI_COMM_WORLD" "$log")" = "$np" ] ||
    fail "nexar must say on each rank that it started late"
echo "all PMPI tool runs passed"
