// The exported MPI entry points.  Each is a thin extern "C" wrapper: it
// calls the PMPI_* function or the nexar runtime, and no C++ exception ever
// crosses back into the caller.
#include <mpi.h>

#include <exception>

#include "core/collective.h"
#include "core/log.h"
#include "core/runtime.h"
#include "core/stats.h"
#include "shim/shim.h"

namespace nexar {

void shim_start_runtime() {
    try {
        int provided = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&provided);
        nexar::Runtime::start(provided);
    } catch (const std::exception& e) {
        NEXAR_WARN("could not start (%s); every MPI_Allreduce passes through to MPI", e.what());
    } catch (...) {
        NEXAR_WARN("could not start; every MPI_Allreduce passes through to MPI");
    }
}

void shim_stop_runtime() {
    try {
        nexar::Runtime::stop();
    } catch (...) {
        NEXAR_WARN("error while shutting down; continuing with MPI_Finalize");
    }
}

}  // namespace nexar

extern "C" {

int MPI_Init(int* argc, char*** argv) {
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) nexar::shim_start_runtime();
    return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) nexar::shim_start_runtime();
    return rc;
}

int MPI_Finalize(void) {
    nexar::shim_stop_runtime();
    return PMPI_Finalize();
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    return nexar::shim_guard("MPI_Allreduce", comm,
                             [&] { return nexar::intercept_allreduce(sendbuf, recvbuf, count, datatype, op, comm); });
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
    nexar::CollectiveCall c;
    c.kind = nexar::Collective::reduce_scatter, c.name = "MPI_Reduce_scatter_block";
    c.sendbuf = sendbuf, c.recvbuf = recvbuf, c.count = recvcount, c.datatype = datatype, c.op = op, c.comm = comm;
    return nexar::shim_intercept(c);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm) {
    nexar::CollectiveCall c;
    c.kind = nexar::Collective::reduce_scatter, c.name = "MPI_Reduce_scatter";
    c.varying = true;
    c.sendbuf = sendbuf, c.recvbuf = recvbuf, c.recvcounts = recvcounts, c.datatype = datatype, c.op = op;
    c.comm = comm;
    return nexar::shim_intercept(c);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
    nexar::CollectiveCall c;
    c.kind = nexar::Collective::allgather, c.name = "MPI_Allgather";
    c.sendbuf = sendbuf, c.sendcount = sendcount, c.sendtype = sendtype;
    c.recvbuf = recvbuf, c.count = recvcount, c.datatype = recvtype, c.comm = comm;
    return nexar::shim_intercept(c);
}

}  // extern "C"
