// An MPI that does not know CUDA, as the test sees it: this program's own
// PMPI_ entry points for the collectives nexar hands the MPI.  libnexar_pmpi
// (linked into the program) calls PMPI_Allreduce and the others; the
// dynamic linker binds those calls here first, and these pass them on to
// the MPI's (dlsym RTLD_NEXT).  Once armed (arm_device_trap), a call that
// brings a buffer the emulated GPU says is device memory fails the test at
// once: on a real MPI without CUDA support that call would read or write
// device memory as if it were the host's.  The emulated GPU's "device"
// memory is host memory, so without the trap such a call would go unseen.
#include "mpi_device_trap.h"

#include <dlfcn.h>
#include <unistd.h>

#include "../mpi/persistent.h"

#include <cstdio>

namespace {

const nexar_device_api* g_api = nullptr;

bool on_device(const void* p) {
    int kind = NEXAR_MEM_HOST, device = 0;
    return p && p != MPI_IN_PLACE && g_api->pointer_kind(p, &kind, &device) == 0 && kind == NEXAR_MEM_DEVICE;
}

void check(const char* name, const void* sendbuf, const void* recvbuf) {
    if (!g_api || !(on_device(sendbuf) || on_device(recvbuf))) return;
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "FAIL rank %d: a device buffer reached P%s of an MPI that does not know CUDA (%s)\n", rank, name,
            on_device(sendbuf) ? "sendbuf" : "recvbuf");
    fflush(stderr);
    // MPICH's launcher drops what it has not forwarded yet once MPI_Abort
    // starts killing (the line went missing once in a CI run): give it a moment.
    usleep(300000);
    PMPI_Abort(MPI_COMM_WORLD, 5);
}

template <class F>
F next(const char* name) {
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

#define TRAP_EXPORT __attribute__((visibility("default")))

TRAP_EXPORT void arm_device_trap(const nexar_device_api* api) { g_api = api; }

extern "C" {

// The MPI's point-to-point, which nexar's ring may take between ranks
// (transport/mpi_channel.h): staged through host memory, never a device
// buffer.
TRAP_EXPORT int PMPI_Isend(const void* b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
    static auto real = next<int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*)>("PMPI_Isend");
    check("MPI_Isend", b, nullptr);
    return real(b, n, t, dest, tag, comm, req);
}

TRAP_EXPORT int PMPI_Irecv(void* b, int n, MPI_Datatype t, int source, int tag, MPI_Comm comm, MPI_Request* req) {
    static auto real = next<int (*)(void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*)>("PMPI_Irecv");
    check("MPI_Irecv", nullptr, b);
    return real(b, n, t, source, tag, comm, req);
}

TRAP_EXPORT int PMPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    static auto real = next<int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm)>("PMPI_Allreduce");
    check("MPI_Allreduce", s, r);
    return real(s, r, n, t, op, comm);
}

TRAP_EXPORT int PMPI_Reduce_scatter_block(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    static auto real =
        next<int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm)>("PMPI_Reduce_scatter_block");
    check("MPI_Reduce_scatter_block", s, r);
    return real(s, r, n, t, op, comm);
}

TRAP_EXPORT int PMPI_Reduce_scatter(const void* s, void* r, const int n[], MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    static auto real =
        next<int (*)(const void*, void*, const int[], MPI_Datatype, MPI_Op, MPI_Comm)>("PMPI_Reduce_scatter");
    check("MPI_Reduce_scatter", s, r);
    return real(s, r, n, t, op, comm);
}

TRAP_EXPORT int PMPI_Allgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm comm) {
    static auto real =
        next<int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm)>("PMPI_Allgather");
    check("MPI_Allgather", s, r);
    return real(s, sn, st, r, rn, rt, comm);
}

TRAP_EXPORT int PMPI_Iallreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm, MPI_Request* req) {
    static auto real =
        next<int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*)>("PMPI_Iallreduce");
    check("MPI_Iallreduce", s, r);
    return real(s, r, n, t, op, comm, req);
}

TRAP_EXPORT int PMPI_Ireduce_scatter_block(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                                           MPI_Request* req) {
    static auto real = next<int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*)>(
        "PMPI_Ireduce_scatter_block");
    check("MPI_Ireduce_scatter_block", s, r);
    return real(s, r, n, t, op, comm, req);
}

TRAP_EXPORT int PMPI_Ireduce_scatter(const void* s, void* r, const int n[], MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                                     MPI_Request* req) {
    static auto real = next<int (*)(const void*, void*, const int[], MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*)>(
        "PMPI_Ireduce_scatter");
    check("MPI_Ireduce_scatter", s, r);
    return real(s, r, n, t, op, comm, req);
}

TRAP_EXPORT int PMPI_Iallgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm comm,
                    MPI_Request* req) {
    static auto real = next<int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm, MPI_Request*)>(
        "PMPI_Iallgather");
    check("MPI_Iallgather", s, r);
    return real(s, sn, st, r, rn, rt, comm, req);
}

// The MPI's own persistent allreduce, under the name this MPI gives it.
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define TRAP_ALLREDUCE_INIT PMPI_Allreduce_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define TRAP_ALLREDUCE_INIT PMPIX_Allreduce_init
#endif
#ifdef TRAP_ALLREDUCE_INIT
#define TRAP_STRING(x) TRAP_STRING2(x)
#define TRAP_STRING2(x) #x
TRAP_EXPORT int TRAP_ALLREDUCE_INIT(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                                    MPI_Info info, MPI_Request* req) {
    static auto real = next<int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info, MPI_Request*)>(
        TRAP_STRING(TRAP_ALLREDUCE_INIT));
    check("MPI_Allreduce_init", s, r);
    return real(s, r, n, t, op, comm, info, req);
}
#endif

}  // extern "C"
