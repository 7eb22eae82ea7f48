// The exported MPI entry points.  Each is a thin extern "C" wrapper: it
// calls the PMPI_* function or the nexar runtime, and no C++ exception ever
// crosses back into the caller.
#include <mpi.h>

#include <exception>

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
    try {
        return nexar::intercept_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    } catch (const std::exception& e) {
        // Only allocation failures (std::bad_alloc) can throw; the error
        // handler decides what happens next, as for any MPI error.
        NEXAR_ERROR("MPI_Allreduce: internal error (%s)", e.what());
        return nexar::raise_mpi_error(comm, MPI_ERR_INTERN);
    } catch (...) {
        NEXAR_ERROR("MPI_Allreduce: internal error");
        return nexar::raise_mpi_error(comm, MPI_ERR_INTERN);
    }
}

}  // extern "C"
