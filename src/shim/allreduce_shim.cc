// The exported MPI entry points.  Each is a thin extern "C" wrapper: it
// calls the nexar runtime or the MPI, and no C++ exception ever crosses back
// into the caller.
//
// Beside other PMPI tools (profilers, tracers), in either load order:
//   - PMPI_X is defined here too, for every call nexar takes (and for
//     PMPI_Init*/PMPI_Finalize): a tool loaded before nexar wraps MPI_X and
//     calls PMPI_X, which lands here, and nexar forwards what it does not
//     take to the MPI's own PMPI_X (mpi/pmpi.h).
//   - MPI_X forwards to the next MPI_X in load order when that is a tool's
//     (loaded after nexar): the tool sees the call and reaches nexar through
//     PMPI_X.  When the next MPI_X is the MPI's own, MPI_X is nexar's PMPI_X.
// So every call is handled once, whatever the order.  A tool after nexar
// that does not call PMPI_X (it reaches the MPI some other way) hides the
// call from nexar: said once, with the fix.
#include <dlfcn.h>
#include <mpi.h>

#include <atomic>
#include <exception>

#include "base/log.h"
#include "call/collective.h"
#include "mpi/mpi_family.h"
#include "mpi/pmpi.h"
#include "runtime/runtime.h"
#include "runtime/stats.h"
#include "shim/shim.h"

namespace nexar {

namespace {

// A library loaded before this one that defines PMPI_Allreduce as well takes
// the calls tools make through PMPI_Allreduce: nexar cannot see them.
void check_pmpi_order() {
    if (const char* other = pmpi::other_definer_of("PMPI_Allreduce"))
        NEXAR_WARN("%s defines PMPI_Allreduce and is loaded before libnexar_pmpi: calls that tools make through "
                   "PMPI_* reach it, not nexar; load libnexar_pmpi first",
                   other);
}

}  // namespace

void shim_start_runtime() {
    try {
        int provided = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&provided);
        const bool first = !Runtime::get();
        nexar::Runtime::start(provided);
        if (first) check_pmpi_order();
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

namespace {

// The collectives' own handling (PMPI_X's body).  large_count: the call
// came as MPI_Allreduce_c.
int allreduce_here(const void* sendbuf, void* recvbuf, int64_t count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, bool large_count = false) {
    return shim_guard(large_count ? "MPI_Allreduce_c" : "MPI_Allreduce", comm, [&] {
        return intercept_allreduce(sendbuf, recvbuf, count, datatype, op, comm, large_count);
    });
}

int reduce_scatter_block_here(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm) {
    return shim_intercept(
        reduce_scatter_block_call("MPI_Reduce_scatter_block", sendbuf, recvbuf, recvcount, datatype, op, comm));
}

int reduce_scatter_here(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                        MPI_Comm comm) {
    return shim_intercept(reduce_scatter_call("MPI_Reduce_scatter", sendbuf, recvbuf, recvcounts, datatype, op, comm));
}

int allgather_here(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm) {
    return shim_intercept(
        allgather_call("MPI_Allgather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

using InitFn = int (*)(int*, char***);
using InitThreadFn = int (*)(int*, char***, int, int*);
using FinalizeFn = int (*)();
using AllreduceFn = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
#if NEXAR_HAVE_LARGE_COUNT
using AllreduceCFn = int (*)(const void*, void*, MPI_Count, MPI_Datatype, MPI_Op, MPI_Comm);
#endif
using ReduceScatterBlockFn = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
using ReduceScatterFn = int (*)(const void*, void*, const int[], MPI_Datatype, MPI_Op, MPI_Comm);
using AllgatherFn = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);

}  // namespace
}  // namespace nexar

using namespace nexar;

extern "C" {

// ---------------------------------------------------------------- start, stop
int PMPI_Init(int* argc, char*** argv) {
    int rc = pmpi::init(argc, argv);
    if (rc == MPI_SUCCESS) shim_start_runtime();
    return rc;
}

int PMPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
    int rc = pmpi::init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) shim_start_runtime();
    return rc;
}

int PMPI_Finalize(void) {
    shim_stop_runtime();
    return pmpi::finalize();
}

// A tool after nexar initializes through PMPI_Init*, which starts nexar.
int MPI_Init(int* argc, char*** argv) {
    static const auto tool = tool_after_us<InitFn>("MPI_Init");
    int rc = tool ? tool(argc, argv) : pmpi::init(argc, argv);
    if (rc == MPI_SUCCESS) shim_start_runtime();
    return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
    static const auto tool = tool_after_us<InitThreadFn>("MPI_Init_thread");
    int rc = tool ? tool(argc, argv, required, provided) : pmpi::init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) shim_start_runtime();
    return rc;
}

// A tool after nexar finalizes through PMPI_Finalize, which stops nexar
// (so nexar still takes the calls the tool makes before it); so does the
// MPI_COMM_SELF attribute (runtime/runtime.cc) when nothing passes here.
int MPI_Finalize(void) {
    static const auto tool = tool_after_us<FinalizeFn>("MPI_Finalize");
    if (tool) return tool();
    shim_stop_runtime();
    return pmpi::finalize();
}

// ---------------------------------------------------------------- collectives
int PMPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    reached_pmpi();
    return allreduce_here(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    static const auto tool = tool_after_us<AllreduceFn>("MPI_Allreduce");
    if (tool) return through_tool(tool, "MPI_Allreduce", sendbuf, recvbuf, count, datatype, op, comm);
    return allreduce_here(sendbuf, recvbuf, count, datatype, op, comm);
}

#if NEXAR_HAVE_LARGE_COUNT
// MPI-4's large-count allreduce (MPICH's Fortran bindings call it too).
int PMPI_Allreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                     MPI_Comm comm) {
    reached_pmpi();
    return allreduce_here(sendbuf, recvbuf, int64_t(count), datatype, op, comm, true);
}

int MPI_Allreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                    MPI_Comm comm) {
    static const auto tool = tool_after_us<AllreduceCFn>("MPI_Allreduce_c");
    if (tool) return through_tool(tool, "MPI_Allreduce_c", sendbuf, recvbuf, count, datatype, op, comm);
    return allreduce_here(sendbuf, recvbuf, int64_t(count), datatype, op, comm, true);
}
#endif

int PMPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm) {
    reached_pmpi();
    return reduce_scatter_block_here(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
    static const auto tool = tool_after_us<ReduceScatterBlockFn>("MPI_Reduce_scatter_block");
    if (tool) return through_tool(tool, "MPI_Reduce_scatter_block", sendbuf, recvbuf, recvcount, datatype, op, comm);
    return reduce_scatter_block_here(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int PMPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                        MPI_Comm comm) {
    reached_pmpi();
    return reduce_scatter_here(sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm) {
    static const auto tool = tool_after_us<ReduceScatterFn>("MPI_Reduce_scatter");
    if (tool) return through_tool(tool, "MPI_Reduce_scatter", sendbuf, recvbuf, recvcounts, datatype, op, comm);
    return reduce_scatter_here(sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

int PMPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm) {
    reached_pmpi();
    return allgather_here(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
    static const auto tool = tool_after_us<AllgatherFn>("MPI_Allgather");
    if (tool)
        return through_tool(tool, "MPI_Allgather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    return allgather_here(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

}  // extern "C"
