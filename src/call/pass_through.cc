#include "call/pass_through.h"

#include <cstring>
#include <string>

#include "base/log.h"
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

int pass_through(const CollectiveCall& c, std::atomic<uint64_t>& counter) {
    counter.fetch_add(1, std::memory_order_relaxed);
    return call_pmpi(c, c.kind == Collective::allgather ? MPI_OP_NULL : pmpi_op(c.datatype, c.op));
}

namespace {

// The bytes a call reads from or writes to each buffer, in MPI's terms:
// the whole vector, and this rank's block and where it starts.
struct CallBytes {
    size_t whole = 0, own = 0, own_offset = 0;
};
CallBytes call_bytes(const CollectiveCall& c) {
    int size = 0, me = 0, tsize = 0;
    PMPI_Comm_size(c.comm, &size);
    PMPI_Comm_rank(c.comm, &me);
    PMPI_Type_size(c.datatype, &tsize);
    CallBytes b;
    if (c.kind == Collective::allreduce) return b.whole = size_t(c.count) * size_t(tsize), b;
    size_t before = 0, all = 0;
    for (int r = 0; r < size; ++r) {
        const size_t items = c.varying ? size_t(c.recvcounts[r]) : size_t(c.count);
        if (r < me) before += items;
        all += items;
    }
    b.whole = all * size_t(tsize);
    b.own = (c.varying ? size_t(c.recvcounts[me]) : size_t(c.count)) * size_t(tsize);
    b.own_offset = before * size_t(tsize);
    return b;
}

// Device buffers cannot be handed to an MPI that does not know CUDA: such
// a rank copies what the call reads to host memory, lets PMPI work there in
// place, and copies what it writes back (what users of such MPIs do by hand).
int staged_through_host(Runtime& rt, CommContext& ctx, const LocalPlan& plan, const CollectiveCall& call) {
    const CallBytes b = call_bytes(call);
    DeviceBuffers& dev = ctx.device_buffers(rt.device_api());
    char* host = dev.host_stage(b.whole);
    const void* src = call.sendbuf == MPI_IN_PLACE ? call.recvbuf : call.sendbuf;
    std::string error;
    auto copy = [&](void* dst, const void* from, size_t bytes) {
        return bytes == 0 || ok(dev.copy(plan.device_id, dst, from, bytes, &error));
    };
    // In: the whole input vector, or (allgather) this rank's block at its place.
    bool copied = call.kind == Collective::allgather
                      ? copy(host + b.own_offset,
                             call.sendbuf == MPI_IN_PLACE ? static_cast<const char*>(call.recvbuf) + b.own_offset
                                                          : call.sendbuf,
                             b.own)
                      : copy(host, src, b.whole);
    if (copied) {
        // The same call, in place in host memory.
        CollectiveCall staged = call;
        staged.sendbuf = MPI_IN_PLACE;
        staged.recvbuf = host;
        const int rc = call_pmpi(staged, call.kind == Collective::allgather ? MPI_OP_NULL : pmpi_op(call.datatype, call.op));
        if (rc != MPI_SUCCESS) return rc;
        // Out: the reduce-scatter's block, or the whole vector.
        copied = copy(call.recvbuf, host, call.kind == Collective::reduce_scatter ? b.own : b.whole);
    }
    if (!copied) {
        NEXAR_ERROR("%s on device memory: %s", call.name, error.c_str());
        return raise_mpi_error(call.comm, MPI_ERR_OTHER);
    }
    return MPI_SUCCESS;
}

}  // namespace

// An eligible call the ring cannot take: to PMPI, with device buffers
// staged through host memory where MPI cannot take them.
int fall_back(Runtime& rt, CommContext& ctx, const LocalPlan& plan, const CollectiveCall& call) {
    Stats& stats = process_stats();
    if (plan.memory != MemoryType::device || rt.mpi_cuda_aware() || !rt.device_api())
        return pass_through(call, stats.fallback_calls);
    stats.fallback_calls.fetch_add(1, std::memory_order_relaxed);
    return staged_through_host(rt, ctx, plan, call);
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
    return post_pmpi_nonblocking(c, request);
}

}  // namespace nexar
