#include "call/pass_through.h"

#include <cstring>
#include <string>

#include "base/log.h"
#include "call/mpi_staging.h"
#include "mpi/pmpi.h"
#include "reduce/mpi_types.h"
#include "runtime/stats.h"

namespace nexar {

namespace {

// The PMPI function the call would have reached, with `op` (MPI_Allgather: none).
int call_pmpi(const CollectiveCall& c, MPI_Op op) {
    switch (c.kind) {
        case Collective::allreduce:
            return pmpi::allreduce_count(c.sendbuf, c.recvbuf, c.count, c.large_count, c.datatype, op, c.comm);
        case Collective::reduce_scatter:
            return c.varying ? pmpi::reduce_scatter(c.sendbuf, c.recvbuf, c.recvcounts, c.datatype, op, c.comm)
                             : pmpi::reduce_scatter_block(c.sendbuf, c.recvbuf, int(c.count), c.datatype, op, c.comm);
        case Collective::allgather:
            return pmpi::allgather(c.sendbuf, c.sendcount, c.sendtype, c.recvbuf, int(c.count), c.datatype, c.comm);
    }
    return MPI_ERR_INTERN;
}

}  // namespace

// The op to hand MPI: nexar's own 16-bit float types need nexar's ops inside
// MPI; an unsupported pair goes as it came, for MPI to report.
MPI_Op pmpi_op(MPI_Datatype dt, MPI_Op op) {
    MPI_Op use = passthrough_op(dt, op);
    return use == MPI_OP_NULL ? op : use;
}

void report_mpi_call(const CollectiveCall& c, CallMode mode) {
    JobReport* report = job_report();
    if (!report) return;
    // After MPI took the call: its handles are valid.  (The allreduce's
    // vector needs no communicator size.)
    int size = 1, type_size = 0;
    uint64_t items = 0;
    const bool sized = (c.kind == Collective::allreduce || PMPI_Comm_size(c.comm, &size) == MPI_SUCCESS) &&
                       !negative_count(c, size) && vector_items(c, size, &items) &&
                       (c.kind == Collective::allgather || PMPI_Type_size(c.datatype, &type_size) == MPI_SUCCESS);
    const uint64_t bytes = !sized ? 0 : c.kind == Collective::allgather ? items : items * uint64_t(type_size);
    report->add_mpi(c.kind, mode, bytes);
}

int pass_through(const CollectiveCall& c, std::atomic<uint64_t>& counter, bool report) {
    counter.fetch_add(1, std::memory_order_relaxed);
    const int rc = call_pmpi(c, c.kind == Collective::allgather ? MPI_OP_NULL : pmpi_op(c.datatype, c.op));
    if (report && rc == MPI_SUCCESS) report_mpi_call(c, CallMode::blocking);
    return rc;
}

namespace {

// The blocking call, staged on its caller's thread.
int staged_for_mpi(Runtime& rt, const CollectiveCall& c, const BufferKinds& kinds) {
    thread_local MpiStaging* staging = new MpiStaging;  // never destroyed, as the thread's copier
    CollectiveCall staged;
    std::string error;
    Status s = staging->stage_in(rt, c, kinds, &staged, &error);
    if (ok(s)) {
        const int rc = call_pmpi(staged, c.kind == Collective::allgather ? MPI_OP_NULL : pmpi_op(c.datatype, c.op));
        if (rc != MPI_SUCCESS) return rc;
        s = staging->stage_out(rt, c, &error);
    }
    if (!ok(s)) {
        NEXAR_ERROR("%s on device memory: %s", c.name, error.c_str());
        return raise_mpi_error(c.comm, MPI_ERR_OTHER);
    }
    return MPI_SUCCESS;
}

}  // namespace

int mpi_path(Runtime* rt, const CollectiveCall& c, std::atomic<uint64_t>& counter, bool report) {
    BufferKinds kinds;
    if (!needs_staging(rt, c, &kinds)) return pass_through(c, counter, report);
    counter.fetch_add(1, std::memory_order_relaxed);
    const int rc = staged_for_mpi(*rt, c, kinds);
    if (report && rc == MPI_SUCCESS) report_mpi_call(c, CallMode::blocking);
    return rc;
}

int post_pmpi_nonblocking(const CollectiveCall& c, MPI_Request* request) {
    const MPI_Op op = c.kind == Collective::allgather ? MPI_OP_NULL : pmpi_op(c.datatype, c.op);
    switch (c.kind) {
        case Collective::allreduce:
            return pmpi::iallreduce(c.sendbuf, c.recvbuf, int(c.count), c.datatype, op, c.comm, request);
        case Collective::reduce_scatter:
            return c.varying ? pmpi::ireduce_scatter(c.sendbuf, c.recvbuf, c.recvcounts, c.datatype, op, c.comm, request)
                             : pmpi::ireduce_scatter_block(c.sendbuf, c.recvbuf, int(c.count), c.datatype, op, c.comm,
                                                           request);
        case Collective::allgather:
            return pmpi::iallgather(c.sendbuf, c.sendcount, c.sendtype, c.recvbuf, int(c.count), c.datatype, c.comm,
                                    request);
    }
    return MPI_ERR_INTERN;
}

int pass_through_nonblocking(const CollectiveCall& c, MPI_Request* request) {
    process_stats().passthrough_calls.fetch_add(1, std::memory_order_relaxed);
    const int rc = post_pmpi_nonblocking(c, request);
    if (rc == MPI_SUCCESS) report_mpi_call(c, CallMode::nonblocking);
    return rc;
}

}  // namespace nexar
