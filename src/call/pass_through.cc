#include "call/pass_through.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/log.h"
#include "memory/device.h"
#include "memory/device_buffers.h"
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

// The bytes `count` items of `type` span from the buffer's address:
// [lo, hi), holes of a derived type included.
struct Span {
    MPI_Aint lo = 0, hi = 0;
    bool contiguous = true;  // no holes: every byte in it is the data's
    size_t bytes() const { return size_t(hi - lo); }
};
Span span_of(int64_t count, MPI_Datatype type) {
    Span s;
    MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
    int size = 0;
    if (count <= 0 || PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(type, &true_lb, &true_extent) != MPI_SUCCESS ||
        PMPI_Type_size(type, &size) != MPI_SUCCESS)
        return s;
    s.lo = true_lb;
    s.hi = true_lb + MPI_Aint(count - 1) * extent + true_extent;
    s.contiguous = s.bytes() == size_t(count) * size_t(size);
    return s;
}

// One device buffer of a call, in host memory for the MPI's sake.
class HostCopy {
public:
    // Where the MPI finds the buffer's data: host memory laid out as the
    // device buffer is.
    void* place(Span span) {
        span_ = span;
        if (stage_.size() < span.bytes()) stage_.resize(span.bytes());
        return stage_.data() - span.lo;
    }
    Status copy_in(DeviceBuffers& dev, int device, const void* buf, std::string* error) {
        return move(dev, device, stage_.data(), static_cast<const char*>(buf) + span_.lo, error);
    }
    Status copy_out(DeviceBuffers& dev, int device, void* buf, std::string* error) {
        return move(dev, device, static_cast<char*>(buf) + span_.lo, stage_.data(), error);
    }

private:
    Status move(DeviceBuffers& dev, int device, void* to, const void* from, std::string* error) {
        return span_.bytes() == 0 ? Status::ok : dev.copy(device, to, from, span_.bytes(), error);
    }
    Span span_;
    std::vector<char> stage_;  // kept for the thread's next call
};

// Each thread's own (a blocking call stages on its caller's thread; two
// threads may call collectives at once on two communicators).  Never
// destroyed: a thread may end after the GPU's driver has gone.
struct ThreadStaging {
    explicit ThreadStaging(const nexar_device_api* api) : dev(api) {}
    DeviceBuffers dev;
    HostCopy send, recv;
};
ThreadStaging& thread_staging(const nexar_device_api* api) {
    thread_local ThreadStaging* t = nullptr;
    if (!t || t->dev.api() != api) t = new ThreadStaging(api);
    return *t;
}

// What the call reads from sendbuf, and what it reads from (in place) and
// writes to recvbuf, in items of its types.
struct CallItems {
    int64_t send = 0;            // of sendtype (the allgather) or datatype
    int64_t recv_read = 0;       // in place: the input in recvbuf
    int64_t recv_written = 0;    // the result
};
CallItems call_items(const CollectiveCall& c) {
    CallItems n;
    int size = 0, me = 0;
    PMPI_Comm_size(c.comm, &size);
    PMPI_Comm_rank(c.comm, &me);
    const bool in_place = c.sendbuf == MPI_IN_PLACE;
    switch (c.kind) {
        case Collective::allreduce: n.send = n.recv_written = c.count; break;
        case Collective::reduce_scatter: {
            int64_t all = 0;
            for (int r = 0; r < size; ++r) all += c.varying ? c.recvcounts[r] : c.count;
            n.send = all;
            n.recv_written = c.varying ? c.recvcounts[me] : c.count;
            break;
        }
        case Collective::allgather:
            n.send = c.sendcount;
            n.recv_written = int64_t(size) * c.count;
            break;
    }
    if (in_place) n.recv_read = c.kind == Collective::allreduce ? c.count : c.kind == Collective::allgather ? n.recv_written : n.send;
    return n;
}

// The call with its device buffers in host memory: what a user of an MPI
// that does not know CUDA does by hand.  The MPI gets host memory laid out
// as the device buffers are; what it reads is copied there first (with the
// holes of a derived type, so that copying back leaves them as they were),
// and what it writes is copied back.
int staged_for_mpi(Runtime& rt, const CollectiveCall& c, const BufferKinds& kinds) {
    CurrentDeviceGuard keep_device(rt.device_api());
    ThreadStaging& t = thread_staging(rt.device_api());
    const CallItems n = call_items(c);
    const MPI_Datatype send_type = c.kind == Collective::allgather ? c.sendtype : c.datatype;
    CollectiveCall staged = c;
    std::string error;
    Status s = Status::ok;
    if (kinds.send == MemoryType::device) {
        staged.sendbuf = t.send.place(span_of(n.send, send_type));
        s = t.send.copy_in(t.dev, kinds.send_device, c.sendbuf, &error);
    }
    const Span recv_span = span_of(std::max(n.recv_read, n.recv_written), c.datatype);
    if (ok(s) && kinds.recv == MemoryType::device) {
        staged.recvbuf = t.recv.place(recv_span);
        if (n.recv_read > 0 || !recv_span.contiguous) s = t.recv.copy_in(t.dev, kinds.recv_device, c.recvbuf, &error);
    }
    if (ok(s)) {
        const int rc = call_pmpi(staged, c.kind == Collective::allgather ? MPI_OP_NULL : pmpi_op(c.datatype, c.op));
        if (rc != MPI_SUCCESS) return rc;
        if (kinds.recv == MemoryType::device) {
            // Only what the call writes goes back (an in-place
            // reduce-scatter's result is its block at the start).
            if (n.recv_written < std::max(n.recv_read, n.recv_written) && recv_span.contiguous)
                t.recv.place(span_of(n.recv_written, c.datatype));
            s = t.recv.copy_out(t.dev, kinds.recv_device, c.recvbuf, &error);
        }
    }
    if (!ok(s)) {
        NEXAR_ERROR("%s on device memory: %s", c.name, error.c_str());
        return raise_mpi_error(c.comm, MPI_ERR_OTHER);
    }
    return MPI_SUCCESS;
}

}  // namespace

BufferKinds buffer_kinds(const Runtime& rt, const CollectiveCall& c) {
    BufferKinds k;
    if (c.sendbuf != MPI_IN_PLACE) k.send = classify_pointer(rt.device_api(), c.sendbuf, &k.send_device);
    k.recv = classify_pointer(rt.device_api(), c.recvbuf, &k.recv_device);
    return k;
}

int mpi_path(Runtime* rt, const CollectiveCall& c, std::atomic<uint64_t>& counter) {
    if (!rt || !rt->stages_device_buffers()) return pass_through(c, counter);
    const BufferKinds kinds = buffer_kinds(*rt, c);
    if (!kinds.any_device()) return pass_through(c, counter);
    counter.fetch_add(1, std::memory_order_relaxed);
    process_stats().staged_calls.fetch_add(1, std::memory_order_relaxed);
    return staged_for_mpi(*rt, c, kinds);
}

// An eligible call the ring cannot take: to PMPI, with device buffers
// staged through host memory where MPI cannot take them.
int fall_back(Runtime& rt, const CollectiveCall& call) { return mpi_path(&rt, call, process_stats().fallback_calls); }

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
