// Communicator creation sets the new communicator's ring up at once
// (runtime/runtime.h, prepare_context), where nonblocking calls may take it: a
// nonblocking call cannot set it up later without waiting for the other
// ranks (call/nonblocking.h).  Every creator here is collective over the
// new communicator at least, so its members all take part: MPI_Comm_dup,
// MPI_Comm_dup_with_info, MPI_Comm_split, MPI_Comm_split_type,
// MPI_Comm_create, MPI_Comm_create_group, MPI_Intercomm_merge and the
// topologies (MPI_Cart_create, MPI_Cart_sub, MPI_Graph_create,
// MPI_Dist_graph_create, MPI_Dist_graph_create_adjacent).  MPI_Comm_idup
// is not: it returns before the communicator exists; its ring is set up by
// its first blocking collective, and its nonblocking calls pass through
// until then.
// MPI_X and PMPI_X are both defined, for tools on either side, as for the
// collectives (shim/allreduce_shim.cc).
#include <mpi.h>

#include "mpi/pmpi.h"
#include "runtime/runtime.h"
#include "shim/shim.h"

namespace nexar {

namespace {

int created(int rc, MPI_Comm* newcomm) {
    if (rc != MPI_SUCCESS || !newcomm || *newcomm == MPI_COMM_NULL) return rc;
    try {
        if (Runtime* rt = Runtime::get()) rt->prepare_context(*newcomm);
    } catch (...) {
        NEXAR_WARN("could not set a new communicator's ring up; its nonblocking calls pass through to MPI");
    }
    return rc;
}

int comm_dup_here(MPI_Comm comm, MPI_Comm* newcomm) { return created(pmpi::comm_dup(comm, newcomm), newcomm); }

int comm_dup_with_info_here(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
    return created(pmpi::comm_dup_with_info(comm, info, newcomm), newcomm);
}

int comm_split_here(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
    return created(pmpi::comm_split(comm, color, key, newcomm), newcomm);
}

int comm_split_type_here(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
    return created(pmpi::comm_split_type(comm, split_type, key, info, newcomm), newcomm);
}

int comm_create_here(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
    return created(pmpi::comm_create(comm, group, newcomm), newcomm);
}

int comm_create_group_here(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
    return created(pmpi::comm_create_group(comm, group, tag, newcomm), newcomm);
}

int intercomm_merge_here(MPI_Comm intercomm, int high, MPI_Comm* newcomm) {
    return created(pmpi::intercomm_merge(intercomm, high, newcomm), newcomm);
}

int cart_create_here(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm* newcomm) {
    return created(pmpi::cart_create(comm, ndims, dims, periods, reorder, newcomm), newcomm);
}

int cart_sub_here(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
    return created(pmpi::cart_sub(comm, remain_dims, newcomm), newcomm);
}

int graph_create_here(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder,
                      MPI_Comm* newcomm) {
    return created(pmpi::graph_create(comm, nnodes, index, edges, reorder, newcomm), newcomm);
}

int dist_graph_create_here(MPI_Comm comm, int n, const int sources[], const int degrees[], const int destinations[],
                           const int weights[], MPI_Info info, int reorder, MPI_Comm* newcomm) {
    return created(pmpi::dist_graph_create(comm, n, sources, degrees, destinations, weights, info, reorder, newcomm),
                   newcomm);
}

int dist_graph_create_adjacent_here(MPI_Comm comm, int indegree, const int sources[], const int sourceweights[],
                                    int outdegree, const int destinations[], const int destweights[], MPI_Info info,
                                    int reorder, MPI_Comm* newcomm) {
    return created(pmpi::dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree, destinations,
                                                    destweights, info, reorder, newcomm),
                   newcomm);
}

using CommDupFn = int (*)(MPI_Comm, MPI_Comm*);
using CommDupWithInfoFn = int (*)(MPI_Comm, MPI_Info, MPI_Comm*);
using CommSplitFn = int (*)(MPI_Comm, int, int, MPI_Comm*);
using CommSplitTypeFn = int (*)(MPI_Comm, int, int, MPI_Info, MPI_Comm*);
using CommCreateFn = int (*)(MPI_Comm, MPI_Group, MPI_Comm*);
using CommCreateGroupFn = int (*)(MPI_Comm, MPI_Group, int, MPI_Comm*);
using IntercommMergeFn = int (*)(MPI_Comm, int, MPI_Comm*);
using CartCreateFn = int (*)(MPI_Comm, int, const int[], const int[], int, MPI_Comm*);
using CartSubFn = int (*)(MPI_Comm, const int[], MPI_Comm*);
using GraphCreateFn = int (*)(MPI_Comm, int, const int[], const int[], int, MPI_Comm*);
using DistGraphCreateFn = int (*)(MPI_Comm, int, const int[], const int[], const int[], const int[], MPI_Info, int,
                                  MPI_Comm*);
using DistGraphCreateAdjacentFn = int (*)(MPI_Comm, int, const int[], const int[], int, const int[], const int[],
                                          MPI_Info, int, MPI_Comm*);

}  // namespace
}  // namespace nexar

using namespace nexar;

extern "C" {
NEXAR_SHIM_ENTRY(Comm_dup, CommDupFn, comm_dup_here, (MPI_Comm comm, MPI_Comm * newcomm), (comm, newcomm))
NEXAR_SHIM_ENTRY(Comm_dup_with_info, CommDupWithInfoFn, comm_dup_with_info_here,
                 (MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm), (comm, info, newcomm))
NEXAR_SHIM_ENTRY(Comm_split, CommSplitFn, comm_split_here, (MPI_Comm comm, int color, int key, MPI_Comm* newcomm),
                 (comm, color, key, newcomm))
NEXAR_SHIM_ENTRY(Comm_split_type, CommSplitTypeFn, comm_split_type_here,
                 (MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm),
                 (comm, split_type, key, info, newcomm))
NEXAR_SHIM_ENTRY(Comm_create, CommCreateFn, comm_create_here, (MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm),
                 (comm, group, newcomm))
NEXAR_SHIM_ENTRY(Comm_create_group, CommCreateGroupFn, comm_create_group_here,
                 (MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm), (comm, group, tag, newcomm))
NEXAR_SHIM_ENTRY(Intercomm_merge, IntercommMergeFn, intercomm_merge_here,
                 (MPI_Comm intercomm, int high, MPI_Comm* newcomm), (intercomm, high, newcomm))
NEXAR_SHIM_ENTRY(Cart_create, CartCreateFn, cart_create_here,
                 (MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm* newcomm),
                 (comm, ndims, dims, periods, reorder, newcomm))
NEXAR_SHIM_ENTRY(Cart_sub, CartSubFn, cart_sub_here, (MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm),
                 (comm, remain_dims, newcomm))
NEXAR_SHIM_ENTRY(Graph_create, GraphCreateFn, graph_create_here,
                 (MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder, MPI_Comm* newcomm),
                 (comm, nnodes, index, edges, reorder, newcomm))
NEXAR_SHIM_ENTRY(Dist_graph_create, DistGraphCreateFn, dist_graph_create_here,
                 (MPI_Comm comm, int n, const int sources[], const int degrees[], const int destinations[],
                  const int weights[], MPI_Info info, int reorder, MPI_Comm* newcomm),
                 (comm, n, sources, degrees, destinations, weights, info, reorder, newcomm))
NEXAR_SHIM_ENTRY(Dist_graph_create_adjacent, DistGraphCreateAdjacentFn, dist_graph_create_adjacent_here,
                 (MPI_Comm comm, int indegree, const int sources[], const int sourceweights[], int outdegree,
                  const int destinations[], const int destweights[], MPI_Info info, int reorder, MPI_Comm* newcomm),
                 (comm, indegree, sources, sourceweights, outdegree, destinations, destweights, info, reorder,
                  newcomm))
}  // extern "C"
