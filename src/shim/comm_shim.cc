// Communicator creation: MPI_Comm_dup, MPI_Comm_dup_with_info,
// MPI_Comm_split, MPI_Comm_split_type and MPI_Comm_create set the new
// communicator's ring up at once (core/runtime.h, prepare_context), where
// nonblocking calls may take it: a nonblocking call cannot set it up later
// without waiting for the other ranks (core/nonblocking.h).  Creation is
// collective over the new communicator, so its members all take part.
// MPI_X and PMPI_X are both defined, for tools on either side, as for the
// collectives (shim/allreduce_shim.cc).
#include <mpi.h>

#include "core/pmpi.h"
#include "core/runtime.h"
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

using CommDupFn = int (*)(MPI_Comm, MPI_Comm*);
using CommDupWithInfoFn = int (*)(MPI_Comm, MPI_Info, MPI_Comm*);
using CommSplitFn = int (*)(MPI_Comm, int, int, MPI_Comm*);
using CommSplitTypeFn = int (*)(MPI_Comm, int, int, MPI_Info, MPI_Comm*);
using CommCreateFn = int (*)(MPI_Comm, MPI_Group, MPI_Comm*);

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
}  // extern "C"
