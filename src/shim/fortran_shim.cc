// Fortran entry points.  Open MPI's Fortran bindings call PMPI_Allreduce
// directly, so a C wrapper never sees Fortran programs: these symbols take
// the calls instead, turn Fortran handles into C ones (MPI_*_f2c) and
// Fortran's MPI_IN_PLACE / MPI_BOTTOM into C's, and share the C dispatch.
//
//   mpif.h and `use mpi`:  mpi_allreduce_, mpi_allreduce__, mpi_allreduce,
//                          MPI_ALLREDUCE (the compilers' name manglings);
//                          the same for mpi_reduce_scatter_block,
//                          mpi_reduce_scatter and mpi_allgather
//   `use mpi_f08` (Open MPI): its module procedure calls ompi_allreduce_f
//                          (ompi_reduce_scatter_block_f, ...) in
//                          libmpi_mpifh with exactly these arguments
//                          (handles are the MPI_VAL integers), so that C
//                          function is interposed too.
//
// MPI_INIT, MPI_INIT_THREAD and MPI_FINALIZE are wrapped the same way (the
// Fortran bindings call PMPI_Init* directly, so nexar would never start):
// each calls the MPI's own Fortran routine, found with RTLD_NEXT so its
// Fortran-specific set-up still happens, then starts or stops nexar.
//
// Open MPI only (mpi/mpi_family.h): MPICH's Fortran bindings call the C
// MPI_X, which nexar defines, and have sentinels of their own.
#include <dlfcn.h>
#include <mpi.h>

#include <exception>
#include <mutex>

#include "base/log.h"
#include "call/collective.h"
#include "mpi/mpi_family.h"
#include "mpi/pmpi.h"
#include "runtime/runtime.h"
#include "shim/shim.h"

#if NEXAR_INTERPOSE_FORTRAN

namespace {

// Fortran's MPI_IN_PLACE and MPI_BOTTOM are common-block variables whose
// addresses are the sentinels; their names depend on the mangling.
struct Sentinels {
    const void* in_place[4] = {nullptr, nullptr, nullptr, nullptr};
    const void* bottom[4] = {nullptr, nullptr, nullptr, nullptr};
};

const Sentinels& sentinels() {
    static Sentinels s;
    static std::once_flag once;
    std::call_once(once, [] {
        const char* in_place[] = {"mpi_fortran_in_place_", "mpi_fortran_in_place", "mpi_fortran_in_place__",
                                  "MPI_FORTRAN_IN_PLACE"};
        const char* bottom[] = {"mpi_fortran_bottom_", "mpi_fortran_bottom", "mpi_fortran_bottom__",
                                "MPI_FORTRAN_BOTTOM"};
        for (int i = 0; i < 4; ++i) {
            s.in_place[i] = dlsym(RTLD_DEFAULT, in_place[i]);
            s.bottom[i] = dlsym(RTLD_DEFAULT, bottom[i]);
        }
    });
    return s;
}

bool is_one_of(const void* p, const void* const (&list)[4]) {
    for (const void* q : list)
        if (q && p == q) return true;
    return false;
}

// Fills in the buffers (Fortran's sentinels made C's) and the handles the
// Fortran calls share, dispatches, and sets ierr.
void collective_f(nexar::CollectiveCall c, void* sendbuf, void* recvbuf, const MPI_Fint* datatype,
                  const MPI_Fint* comm, MPI_Fint* ierr) {
    const Sentinels& s = sentinels();
    c.sendbuf = is_one_of(sendbuf, s.in_place) ? MPI_IN_PLACE
                : is_one_of(sendbuf, s.bottom) ? MPI_BOTTOM
                                               : sendbuf;
    c.recvbuf = is_one_of(recvbuf, s.bottom) ? MPI_BOTTOM : recvbuf;
    c.datatype = PMPI_Type_f2c(*datatype);
    c.comm = PMPI_Comm_f2c(*comm);
    const int rc = nexar::shim_intercept(c);
    if (ierr) *ierr = MPI_Fint(rc);
}

void allreduce_f(void* sendbuf, void* recvbuf, const MPI_Fint* count, const MPI_Fint* datatype, const MPI_Fint* op,
                 const MPI_Fint* comm, MPI_Fint* ierr) {
    nexar::CollectiveCall c;
    c.name = "MPI_ALLREDUCE";
    c.count = int(*count);
    c.op = PMPI_Op_f2c(*op);
    collective_f(c, sendbuf, recvbuf, datatype, comm, ierr);
}

void reduce_scatter_block_f(void* sendbuf, void* recvbuf, const MPI_Fint* recvcount, const MPI_Fint* datatype,
                            const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* ierr) {
    nexar::CollectiveCall c;
    c.kind = nexar::Collective::reduce_scatter, c.name = "MPI_REDUCE_SCATTER_BLOCK";
    c.count = int(*recvcount);
    c.op = PMPI_Op_f2c(*op);
    collective_f(c, sendbuf, recvbuf, datatype, comm, ierr);
}

// A Fortran INTEGER array is a C int array where the two have one size
// (every MPI we build against; the build fails otherwise).
static_assert(sizeof(MPI_Fint) == sizeof(int), "MPI_Fint is int");
void reduce_scatter_f(void* sendbuf, void* recvbuf, const MPI_Fint* recvcounts, const MPI_Fint* datatype,
                      const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* ierr) {
    nexar::CollectiveCall c;
    c.kind = nexar::Collective::reduce_scatter, c.name = "MPI_REDUCE_SCATTER";
    c.varying = true;
    c.recvcounts = reinterpret_cast<const int*>(recvcounts);
    c.op = PMPI_Op_f2c(*op);
    collective_f(c, sendbuf, recvbuf, datatype, comm, ierr);
}

void allgather_f(void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                 const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* comm, MPI_Fint* ierr) {
    nexar::CollectiveCall c;
    c.kind = nexar::Collective::allgather, c.name = "MPI_ALLGATHER";
    c.sendcount = int(*sendcount);
    c.sendtype = PMPI_Type_f2c(*sendtype);
    c.count = int(*recvcount);
    collective_f(c, sendbuf, recvbuf, recvtype, comm, ierr);
}

using InitF = void (*)(MPI_Fint*);
using InitThreadF = void (*)(MPI_Fint*, MPI_Fint*, MPI_Fint*);

// The same-named routine of the library after ours (the MPI's own).
template <class F>
F next_definition(const char* name) {
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

void init_f(const char* name, MPI_Fint* ierr) {
    int rc;
    if (InitF next = next_definition<InitF>(name)) {
        MPI_Fint f = MPI_SUCCESS;
        next(&f);
        rc = int(f);
    } else {
        int argc = 0;
        char** argv = nullptr;
        rc = nexar::pmpi::init(&argc, &argv);
    }
    if (rc == MPI_SUCCESS) nexar::shim_start_runtime();
    if (ierr) *ierr = MPI_Fint(rc);
}

void init_thread_f(const char* name, MPI_Fint* required, MPI_Fint* provided, MPI_Fint* ierr) {
    int rc;
    if (InitThreadF next = next_definition<InitThreadF>(name)) {
        MPI_Fint f = MPI_SUCCESS;
        next(required, provided, &f);
        rc = int(f);
    } else {
        int argc = 0, p = 0;
        char** argv = nullptr;
        rc = nexar::pmpi::init_thread(&argc, &argv, int(*required), &p);
        *provided = MPI_Fint(p);
    }
    if (rc == MPI_SUCCESS) nexar::shim_start_runtime();
    if (ierr) *ierr = MPI_Fint(rc);
}

void finalize_f(const char* name, MPI_Fint* ierr) {
    nexar::shim_stop_runtime();
    if (InitF next = next_definition<InitF>(name)) {
        next(ierr);
    } else {
        int rc = nexar::pmpi::finalize();
        if (ierr) *ierr = MPI_Fint(rc);
    }
}

}  // namespace

#define NEXAR_FORTRAN_INIT(name) \
    void name(MPI_Fint* ierr) { init_f(#name, ierr); }
#define NEXAR_FORTRAN_INIT_THREAD(name) \
    void name(MPI_Fint* required, MPI_Fint* provided, MPI_Fint* ierr) { init_thread_f(#name, required, provided, ierr); }
#define NEXAR_FORTRAN_FINALIZE(name) \
    void name(MPI_Fint* ierr) { finalize_f(#name, ierr); }

#define NEXAR_FORTRAN_ALLREDUCE(name)                                                                        \
    void name(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* op, MPI_Fint* comm, \
              MPI_Fint* ierr) {                                                                              \
        allreduce_f(sendbuf, recvbuf, count, datatype, op, comm, ierr);                                      \
    }
#define NEXAR_FORTRAN_REDUCE_SCATTER_BLOCK(name)                                                             \
    void name(void* sendbuf, void* recvbuf, MPI_Fint* recvcount, MPI_Fint* datatype, MPI_Fint* op,           \
              MPI_Fint* comm, MPI_Fint* ierr) {                                                              \
        reduce_scatter_block_f(sendbuf, recvbuf, recvcount, datatype, op, comm, ierr);                       \
    }
#define NEXAR_FORTRAN_REDUCE_SCATTER(name)                                                                   \
    void name(void* sendbuf, void* recvbuf, MPI_Fint* recvcounts, MPI_Fint* datatype, MPI_Fint* op,          \
              MPI_Fint* comm, MPI_Fint* ierr) {                                                              \
        reduce_scatter_f(sendbuf, recvbuf, recvcounts, datatype, op, comm, ierr);                            \
    }
#define NEXAR_FORTRAN_ALLGATHER(name)                                                                        \
    void name(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf, MPI_Fint* recvcount,    \
              MPI_Fint* recvtype, MPI_Fint* comm, MPI_Fint* ierr) {                                          \
        allgather_f(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, ierr);                 \
    }
// Every name mangling of one routine.
#define NEXAR_FORTRAN_NAMES(MACRO, lower, upper) \
    MACRO(lower##_)                              \
    MACRO(lower##__)                             \
    MACRO(lower)                                 \
    MACRO(upper)

extern "C" {
NEXAR_FORTRAN_INIT(mpi_init_)
NEXAR_FORTRAN_INIT(mpi_init__)
NEXAR_FORTRAN_INIT(mpi_init)
NEXAR_FORTRAN_INIT(MPI_INIT)
NEXAR_FORTRAN_INIT_THREAD(mpi_init_thread_)
NEXAR_FORTRAN_INIT_THREAD(mpi_init_thread__)
NEXAR_FORTRAN_INIT_THREAD(mpi_init_thread)
NEXAR_FORTRAN_INIT_THREAD(MPI_INIT_THREAD)
NEXAR_FORTRAN_FINALIZE(mpi_finalize_)
NEXAR_FORTRAN_FINALIZE(mpi_finalize__)
NEXAR_FORTRAN_FINALIZE(mpi_finalize)
NEXAR_FORTRAN_FINALIZE(MPI_FINALIZE)
NEXAR_FORTRAN_NAMES(NEXAR_FORTRAN_ALLREDUCE, mpi_allreduce, MPI_ALLREDUCE)
NEXAR_FORTRAN_NAMES(NEXAR_FORTRAN_REDUCE_SCATTER_BLOCK, mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK)
NEXAR_FORTRAN_NAMES(NEXAR_FORTRAN_REDUCE_SCATTER, mpi_reduce_scatter, MPI_REDUCE_SCATTER)
NEXAR_FORTRAN_NAMES(NEXAR_FORTRAN_ALLGATHER, mpi_allgather, MPI_ALLGATHER)
// Open MPI's mpi_f08 module calls these.
NEXAR_FORTRAN_INIT(ompi_init_f)
NEXAR_FORTRAN_INIT_THREAD(ompi_init_thread_f)
NEXAR_FORTRAN_FINALIZE(ompi_finalize_f)
NEXAR_FORTRAN_ALLREDUCE(ompi_allreduce_f)
NEXAR_FORTRAN_REDUCE_SCATTER_BLOCK(ompi_reduce_scatter_block_f)
NEXAR_FORTRAN_REDUCE_SCATTER(ompi_reduce_scatter_f)
NEXAR_FORTRAN_ALLGATHER(ompi_allgather_f)
}

#endif  // NEXAR_INTERPOSE_FORTRAN
