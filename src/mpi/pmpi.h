// The MPI's own entry points for the calls libnexar_pmpi defines itself.
//
// libnexar_pmpi defines MPI_X and PMPI_X for the collectives it takes and for
// MPI_Init*/MPI_Finalize (shim/allreduce_shim.cc), so that a profiler loaded
// before it, which calls PMPI_X, still reaches the ring.  Inside the library
// a plain call to PMPI_X would then bind to nexar's own definition and come
// back in; every call nexar makes to these functions, for its own
// agreements and set-up and for passing a call through, goes here instead,
// to the next definition in load order (the MPI's).  Other PMPI_* functions
// nexar does not define are called by name as usual.
#pragma once

#include <mpi.h>

#include <cstdint>

namespace nexar::pmpi {

int init(int* argc, char*** argv);
int init_thread(int* argc, char*** argv, int required, int* provided);
int finalize();
int allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
// PMPI_Allreduce_c when the call came as MPI_Allreduce_c (its count may
// pass INT_MAX; MPI-4 MPIs only, mpi/mpi_family.h), else PMPI_Allreduce.
int allreduce_count(const void* sendbuf, void* recvbuf, int64_t count, bool large_count, MPI_Datatype datatype,
                    MPI_Op op, MPI_Comm comm);
int reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                         MPI_Comm comm);
int reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm);
int allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
              MPI_Datatype recvtype, MPI_Comm comm);
// The nonblocking collectives and the completion calls (shim/request_shim.cc).
int iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
               MPI_Request* request);
int ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                          MPI_Comm comm, MPI_Request* request);
int ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                    MPI_Comm comm, MPI_Request* request);
int iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int wait(MPI_Request* request, MPI_Status* status);
int waitall(int count, MPI_Request requests[], MPI_Status statuses[]);
int waitany(int count, MPI_Request requests[], int* index, MPI_Status* status);
int waitsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]);
int test(MPI_Request* request, int* flag, MPI_Status* status);
int testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]);
int testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status);
int testsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]);
int request_get_status(MPI_Request request, int* flag, MPI_Status* status);
int start(MPI_Request* request);
// Communicator creation (shim/comm_shim.cc).
int comm_dup(MPI_Comm comm, MPI_Comm* newcomm);
int comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm);
int comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm);
int comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm);
int comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm);
int comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm);
int intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm* newcomm);
int cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm* newcomm);
int cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm);
int graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder, MPI_Comm* newcomm);
int dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[], const int destinations[],
                      const int weights[], MPI_Info info, int reorder, MPI_Comm* newcomm);
int dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[], const int sourceweights[],
                               int outdegree, const int destinations[], const int destweights[], MPI_Info info,
                               int reorder, MPI_Comm* newcomm);
int request_free(MPI_Request* request);
// The MPI's own persistent collectives' initialization (MPI-4's
// PMPI_X_init, or Open MPI 4's PMPIX_X_init); null where it has neither.
using AllreduceInitFn = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info, MPI_Request*);
using ReduceScatterBlockInitFn = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info,
                                         MPI_Request*);
using AllgatherInitFn = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm, MPI_Info,
                                MPI_Request*);
AllreduceInitFn allreduce_init();
ReduceScatterBlockInitFn reduce_scatter_block_init();
AllgatherInitFn allgather_init();

// The shared object of the MPI itself, the one that defines PMPI_Comm_rank (for telling
// the MPI's MPI_X from a tool's, shim/allreduce_shim.cc); null if unknown.
const void* mpi_library_base();

// The file of the library that calls made through `name` reach (what the
// first definition in load order is), where it is not nexar's own; null
// where it is nexar's (or `name` is defined nowhere).
const char* other_definer_of(const char* name);

}  // namespace nexar::pmpi
