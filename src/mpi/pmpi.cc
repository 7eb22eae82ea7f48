#include "mpi/pmpi.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "mpi/mpi_family.h"

namespace nexar::pmpi {

namespace {

// Resolved once, on first use: RTLD_NEXT from this library is the MPI's
// definition (or, linked statically into a test program, the first after
// the program).  A missing one is a broken installation: say which and stop.
template <class F>
F next(const char* name) {
    void* f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "nexar: error: the MPI library defines no %s (is the program linked with MPI?)\n", name);
        abort();
    }
    return reinterpret_cast<F>(f);
}

#define NEXAR_NEXT(fn, type) static const auto own = next<type>(#fn)

}  // namespace

int init(int* argc, char*** argv) {
    NEXAR_NEXT(PMPI_Init, int (*)(int*, char***));
    return own(argc, argv);
}

int init_thread(int* argc, char*** argv, int required, int* provided) {
    NEXAR_NEXT(PMPI_Init_thread, int (*)(int*, char***, int, int*));
    return own(argc, argv, required, provided);
}

int finalize() {
    NEXAR_NEXT(PMPI_Finalize, int (*)());
    return own();
}

int allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    NEXAR_NEXT(PMPI_Allreduce, int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm));
    return own(sendbuf, recvbuf, count, datatype, op, comm);
}

int allreduce_count(const void* sendbuf, void* recvbuf, int64_t count, bool large_count, MPI_Datatype datatype,
                    MPI_Op op, MPI_Comm comm) {
#if NEXAR_HAVE_LARGE_COUNT
    if (large_count) {
        NEXAR_NEXT(PMPI_Allreduce_c, int (*)(const void*, void*, MPI_Count, MPI_Datatype, MPI_Op, MPI_Comm));
        return own(sendbuf, recvbuf, MPI_Count(count), datatype, op, comm);
    }
#else
    (void)large_count;
#endif
    return allreduce(sendbuf, recvbuf, int(count), datatype, op, comm);
}

int reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                         MPI_Comm comm) {
    NEXAR_NEXT(PMPI_Reduce_scatter_block, int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm));
    return own(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm) {
    NEXAR_NEXT(PMPI_Reduce_scatter, int (*)(const void*, void*, const int[], MPI_Datatype, MPI_Op, MPI_Comm));
    return own(sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

int allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
              MPI_Datatype recvtype, MPI_Comm comm) {
    NEXAR_NEXT(PMPI_Allgather, int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm));
    return own(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
               MPI_Request* request) {
    NEXAR_NEXT(PMPI_Iallreduce, int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*));
    return own(sendbuf, recvbuf, count, datatype, op, comm, request);
}

int ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                          MPI_Comm comm, MPI_Request* request) {
    NEXAR_NEXT(PMPI_Ireduce_scatter_block,
               int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*));
    return own(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
}

int ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                    MPI_Comm comm, MPI_Request* request) {
    NEXAR_NEXT(PMPI_Ireduce_scatter,
               int (*)(const void*, void*, const int[], MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*));
    return own(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
}

int iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
    NEXAR_NEXT(PMPI_Iallgather,
               int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm, MPI_Request*));
    return own(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

int wait(MPI_Request* request, MPI_Status* status) {
    NEXAR_NEXT(PMPI_Wait, int (*)(MPI_Request*, MPI_Status*));
    return own(request, status);
}

int waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
    NEXAR_NEXT(PMPI_Waitall, int (*)(int, MPI_Request[], MPI_Status[]));
    return own(count, requests, statuses);
}

int waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
    NEXAR_NEXT(PMPI_Waitany, int (*)(int, MPI_Request[], int*, MPI_Status*));
    return own(count, requests, index, status);
}

int waitsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
    NEXAR_NEXT(PMPI_Waitsome, int (*)(int, MPI_Request[], int*, int[], MPI_Status[]));
    return own(incount, requests, outcount, indices, statuses);
}

int test(MPI_Request* request, int* flag, MPI_Status* status) {
    NEXAR_NEXT(PMPI_Test, int (*)(MPI_Request*, int*, MPI_Status*));
    return own(request, flag, status);
}

int testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
    NEXAR_NEXT(PMPI_Testall, int (*)(int, MPI_Request[], int*, MPI_Status[]));
    return own(count, requests, flag, statuses);
}

int testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
    NEXAR_NEXT(PMPI_Testany, int (*)(int, MPI_Request[], int*, int*, MPI_Status*));
    return own(count, requests, index, flag, status);
}

int testsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
    NEXAR_NEXT(PMPI_Testsome, int (*)(int, MPI_Request[], int*, int[], MPI_Status[]));
    return own(incount, requests, outcount, indices, statuses);
}

int request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
    NEXAR_NEXT(PMPI_Request_get_status, int (*)(MPI_Request, int*, MPI_Status*));
    return own(request, flag, status);
}

int start(MPI_Request* request) {
    NEXAR_NEXT(PMPI_Start, int (*)(MPI_Request*));
    return own(request);
}

int comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
    NEXAR_NEXT(PMPI_Comm_dup, int (*)(MPI_Comm, MPI_Comm*));
    return own(comm, newcomm);
}

int comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
    NEXAR_NEXT(PMPI_Comm_dup_with_info, int (*)(MPI_Comm, MPI_Info, MPI_Comm*));
    return own(comm, info, newcomm);
}

int comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
    NEXAR_NEXT(PMPI_Comm_split, int (*)(MPI_Comm, int, int, MPI_Comm*));
    return own(comm, color, key, newcomm);
}

int comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
    NEXAR_NEXT(PMPI_Comm_split_type, int (*)(MPI_Comm, int, int, MPI_Info, MPI_Comm*));
    return own(comm, split_type, key, info, newcomm);
}

int comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
    NEXAR_NEXT(PMPI_Comm_create, int (*)(MPI_Comm, MPI_Group, MPI_Comm*));
    return own(comm, group, newcomm);
}

int comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
    NEXAR_NEXT(PMPI_Comm_create_group, int (*)(MPI_Comm, MPI_Group, int, MPI_Comm*));
    return own(comm, group, tag, newcomm);
}

int intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm* newcomm) {
    NEXAR_NEXT(PMPI_Intercomm_merge, int (*)(MPI_Comm, int, MPI_Comm*));
    return own(intercomm, high, newcomm);
}

int cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm* newcomm) {
    NEXAR_NEXT(PMPI_Cart_create, int (*)(MPI_Comm, int, const int[], const int[], int, MPI_Comm*));
    return own(comm, ndims, dims, periods, reorder, newcomm);
}

int cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
    NEXAR_NEXT(PMPI_Cart_sub, int (*)(MPI_Comm, const int[], MPI_Comm*));
    return own(comm, remain_dims, newcomm);
}

int graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder, MPI_Comm* newcomm) {
    NEXAR_NEXT(PMPI_Graph_create, int (*)(MPI_Comm, int, const int[], const int[], int, MPI_Comm*));
    return own(comm, nnodes, index, edges, reorder, newcomm);
}

int dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[], const int destinations[],
                      const int weights[], MPI_Info info, int reorder, MPI_Comm* newcomm) {
    NEXAR_NEXT(PMPI_Dist_graph_create,
               int (*)(MPI_Comm, int, const int[], const int[], const int[], const int[], MPI_Info, int, MPI_Comm*));
    return own(comm, n, sources, degrees, destinations, weights, info, reorder, newcomm);
}

int dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[], const int sourceweights[],
                               int outdegree, const int destinations[], const int destweights[], MPI_Info info,
                               int reorder, MPI_Comm* newcomm) {
    NEXAR_NEXT(PMPI_Dist_graph_create_adjacent, int (*)(MPI_Comm, int, const int[], const int[], int, const int[],
                                                        const int[], MPI_Info, int, MPI_Comm*));
    return own(comm, indegree, sources, sourceweights, outdegree, destinations, destweights, info, reorder, newcomm);
}

int request_free(MPI_Request* request) {
    NEXAR_NEXT(PMPI_Request_free, int (*)(MPI_Request*));
    return own(request);
}

namespace {

template <class F>
F first_of(const char* mpi4, const char* mpix) {
    void* f = dlsym(RTLD_NEXT, mpi4);
    if (!f) f = dlsym(RTLD_NEXT, mpix);
    return reinterpret_cast<F>(f);
}

}  // namespace

AllreduceInitFn allreduce_init() {
    static const auto f = first_of<AllreduceInitFn>("PMPI_Allreduce_init", "PMPIX_Allreduce_init");
    return f;
}

ReduceScatterBlockInitFn reduce_scatter_block_init() {
    static const auto f =
        first_of<ReduceScatterBlockInitFn>("PMPI_Reduce_scatter_block_init", "PMPIX_Reduce_scatter_block_init");
    return f;
}

AllgatherInitFn allgather_init() {
    static const auto f = first_of<AllgatherInitFn>("PMPI_Allgather_init", "PMPIX_Allgather_init");
    return f;
}

const void* mpi_library_base() {
    static const void* base = [] {
        Dl_info info;
        // A symbol only the MPI defines: something between nexar and the
        // MPI may wrap the PMPI collectives themselves (a PMPI-level tool,
        // or the tests' MPI without CUDA, test/gpu/mpi_device_trap.h).
        void* f = dlsym(RTLD_NEXT, "PMPI_Comm_rank");
        return f && dladdr(f, &info) ? static_cast<const void*>(info.dli_fbase) : nullptr;
    }();
    return base;
}

const char* other_definer_of(const char* name) {
    Dl_info first, mine;
    void* f = dlsym(RTLD_DEFAULT, name);
    if (f && dladdr(f, &first) && dladdr(reinterpret_cast<void*>(&other_definer_of), &mine) &&
        first.dli_fbase != mine.dli_fbase)
        return first.dli_fname ? first.dli_fname : "another library";
    return nullptr;
}

}  // namespace nexar::pmpi
