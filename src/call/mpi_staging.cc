#include "call/mpi_staging.h"

#include <algorithm>

#include "memory/device.h"
#include "memory/device_buffers.h"
#include "runtime/stats.h"

namespace nexar {

namespace {

ByteSpan span_of(int64_t count, MPI_Datatype type) {
    ByteSpan s;
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

// What the call reads from sendbuf, and reads from (in place) and writes
// to recvbuf, in items of its types.
struct CallItems {
    int64_t send = 0;          // of sendtype (the allgather) or datatype
    int64_t recv_read = 0;     // in place: the input in recvbuf
    int64_t recv_written = 0;  // the result
};
CallItems call_items(const CollectiveCall& c) {
    CallItems n;
    int size = 0, me = 0;
    PMPI_Comm_size(c.comm, &size);
    PMPI_Comm_rank(c.comm, &me);
    switch (c.kind) {
        case Collective::allreduce: n.send = n.recv_written = c.count; break;
        case Collective::reduce_scatter:
            for (int r = 0; r < size; ++r) n.send += c.varying ? c.recvcounts[r] : c.count;
            n.recv_written = c.varying ? c.recvcounts[me] : c.count;
            break;
        case Collective::allgather:
            n.send = c.sendcount;
            n.recv_written = int64_t(size) * c.count;
            break;
    }
    if (c.sendbuf == MPI_IN_PLACE) n.recv_read = c.kind == Collective::allgather ? n.recv_written : n.send;
    return n;
}

// Each thread's copier: a blocking call stages on its caller's thread, a
// nonblocking one on whichever thread moves it.  Never destroyed: a thread
// may end after the GPU's driver has gone.
DeviceBuffers& thread_copier(const nexar_device_api* api) {
    thread_local DeviceBuffers* t = nullptr;
    if (!t || t->api() != api) t = new DeviceBuffers(api);
    return *t;
}

Status copy(Runtime& rt, int device, void* to, const void* from, size_t bytes, std::string* error) {
    if (bytes == 0) return Status::ok;
    CurrentDeviceGuard keep(rt.device_api());
    return thread_copier(rt.device_api()).copy(device, to, from, bytes, error);
}

}  // namespace

BufferKinds buffer_kinds(const Runtime& rt, const CollectiveCall& c) {
    BufferKinds k;
    if (c.sendbuf != MPI_IN_PLACE) k.send = classify_pointer(rt.device_api(), c.sendbuf, &k.send_device);
    k.recv = classify_pointer(rt.device_api(), c.recvbuf, &k.recv_device);
    return k;
}

bool needs_staging(const Runtime* rt, const CollectiveCall& call, BufferKinds* kinds) {
    if (!rt || !rt->stages_device_buffers()) return false;
    *kinds = buffer_kinds(*rt, call);
    return kinds->any_device();
}

void* MpiStaging::HostCopy::place(ByteSpan s) {
    span = s;
    if (bytes.size() < s.bytes()) bytes.resize(s.bytes());
    return bytes.data() - s.lo;
}

Status MpiStaging::stage_in(Runtime& rt, const CollectiveCall& c, const BufferKinds& kinds, CollectiveCall* staged,
                            std::string* error) {
    process_stats().staged_calls.fetch_add(1, std::memory_order_relaxed);
    kinds_ = kinds;
    const CallItems n = call_items(c);
    *staged = c;
    if (kinds.send == MemoryType::device) {
        const MPI_Datatype type = c.kind == Collective::allgather ? c.sendtype : c.datatype;
        staged->sendbuf = send_.place(span_of(n.send, type));
        Status s = copy(rt, kinds.send_device, send_.bytes.data(), static_cast<const char*>(c.sendbuf) + send_.span.lo,
                        send_.span.bytes(), error);
        if (!ok(s)) return s;
    }
    if (kinds.recv == MemoryType::device) {
        staged->recvbuf = recv_.place(span_of(std::max(n.recv_read, n.recv_written), c.datatype));
        // Only what the call writes goes back, where the span has no holes
        // to keep (an in-place reduce-scatter's result is its block at the start).
        out_ = recv_.span;
        const ByteSpan written = span_of(n.recv_written, c.datatype);
        if (out_.contiguous && written.bytes() < out_.bytes()) out_ = written;
        if (n.recv_read > 0 || !recv_.span.contiguous)
            return copy(rt, kinds.recv_device, recv_.bytes.data(), static_cast<const char*>(c.recvbuf) + recv_.span.lo,
                        recv_.span.bytes(), error);
    }
    return Status::ok;
}

Status MpiStaging::stage_out(Runtime& rt, const CollectiveCall& c, std::string* error) {
    if (kinds_.recv != MemoryType::device) return Status::ok;
    return copy(rt, kinds_.recv_device, static_cast<char*>(c.recvbuf) + out_.lo,
                recv_.bytes.data() + (out_.lo - recv_.span.lo), out_.bytes(), error);
}

}  // namespace nexar
