// One description of an intercepted collective call (DESIGN section 7,
// "phases as data"): the allreduce, the reduce-scatter (MPI_Reduce_scatter
// and MPI_Reduce_scatter_block) and the allgather all go through one
// eligibility -> agreement -> ring or fallback path (call/dispatch.cc).
// They differ only in which halves of the ring run, and in where each
// rank's part of the vector lies (algo/partition.h, ChunkLayout).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "algo/collective_kind.h"
#include "base/status.h"

namespace nexar {

class CommContext;
class RingCallRun;
struct LearnShape;
struct Route;

struct CollectiveCall {
    Collective kind = Collective::allreduce;
    const char* name = "MPI_Allreduce";  // for messages
    const void* sendbuf = nullptr;       // may be MPI_IN_PLACE
    void* recvbuf = nullptr;
    // MPI_Allreduce: items.  MPI_Reduce_scatter_block, MPI_Allgather: items
    // per rank (MPI_Allgather: sendcount, equal to recvcount).
    int64_t count = 0;
    // MPI_Allreduce_c (MPI-4): passed through with the large-count binding.
    bool large_count = false;
    // MPI_Reduce_scatter (varying): items per rank (count is unused).
    bool varying = false;
    const int* recvcounts = nullptr;
    // MPI_Allgather: count and datatype are the receive side's; the send
    // side's must match unless sendbuf is MPI_IN_PLACE.
    int sendcount = 0;
    MPI_Datatype sendtype = MPI_DATATYPE_NULL;
    MPI_Datatype datatype = MPI_DATATYPE_NULL;
    MPI_Op op = MPI_OP_NULL;  // MPI_Allgather: none
    MPI_Comm comm = MPI_COMM_NULL;
};

// The description of each collective's call, one place for the blocking,
// nonblocking and persistent entry points alike (`name` for messages).
inline CollectiveCall allreduce_call(const char* name, const void* sendbuf, void* recvbuf, int64_t count,
                                     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, bool large_count = false) {
    CollectiveCall c;
    c.name = name;
    c.sendbuf = sendbuf, c.recvbuf = recvbuf, c.count = count, c.datatype = datatype, c.op = op, c.comm = comm;
    c.large_count = large_count;
    return c;
}
inline CollectiveCall reduce_scatter_block_call(const char* name, const void* sendbuf, void* recvbuf, int recvcount,
                                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    CollectiveCall c = allreduce_call(name, sendbuf, recvbuf, recvcount, datatype, op, comm);
    c.kind = Collective::reduce_scatter;
    return c;
}
inline CollectiveCall reduce_scatter_call(const char* name, const void* sendbuf, void* recvbuf, const int recvcounts[],
                                          MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    CollectiveCall c = reduce_scatter_block_call(name, sendbuf, recvbuf, 0, datatype, op, comm);
    c.varying = true;
    c.recvcounts = recvcounts;
    return c;
}
inline CollectiveCall allgather_call(const char* name, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                     void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    CollectiveCall c = allreduce_call(name, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, comm);
    c.kind = Collective::allgather;
    c.sendcount = sendcount, c.sendtype = sendtype;
    return c;
}

// The entry point of every intercepted collective: the ring or PMPI.
int intercept_collective(const CollectiveCall& call);
// MPI_Allreduce's (and MPI_Allreduce_c's, large_count; the Fortran
// entries', `name` theirs for messages): small calls pass through, or take
// the known one-shot (call/known_one_shot.h), before a description is built.
int intercept_allreduce(const void* sendbuf, void* recvbuf, int64_t count, MPI_Datatype datatype, MPI_Op op,
                        MPI_Comm comm, bool large_count = false, const char* name = nullptr);

// A blocking call's run polled to its end on the caller's stack; the
// nonblocking calls in flight move along too (a peer may wait for one of
// them before it comes to this call).
Status run_to_end(RingCallRun& run, std::string* error);

// NEXAR_THRESHOLD_BYTES=auto: after a round's last trial of a blocking
// call (`name` on `comm`, `bytes` of class `shape`), every rank reduces
// its best times, and the class settles alike on every rank (every rank
// counted the same calls, so every rank comes here at the same call).
void end_learning_round(CommContext& ctx, const Route& trial, const LearnShape& shape, const char* name, size_t bytes,
                        MPI_Comm comm);

}  // namespace nexar
