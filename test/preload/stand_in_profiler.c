/*
 * A stand-in for the PMPI tools sites preload (mpiP, Darshan, Score-P...):
 * it wraps MPI_Init, MPI_Init_thread, MPI_Finalize and the collectives
 * nexar takes, counts each call and hands it on with PMPI_*, as the MPI
 * standard's profiling interface prescribes.  At MPI_Finalize each rank
 * prints "profiler: rank R: init=I allreduce=A reduce_scatter_block=B
 * allgather=G" to stderr.
 *
 * PROFILER_SKIP_PMPI=1 makes it a badly behaved tool: its MPI_Allreduce
 * calls the next MPI_Allreduce in load order (dlsym(RTLD_NEXT)) instead of
 * PMPI_Allreduce, so that a library loaded before it cannot see the call.
 * PROFILER_INIT_DIRECT=1: its MPI_Init* call the MPI library's own
 * PMPI_Init*, looked up in that library, so that no other library sees MPI
 * start (as when a library is loaded only after MPI_Init).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static long inits, allreduces, reduce_scatter_blocks, allgathers;

static int flag(const char *name) {
    const char *v = getenv(name);
    return v && *v == '1';
}

/* `name` in the library that defines PMPI_Comm_rank (the MPI's). */
static void *in_mpi_library(const char *name) {
    Dl_info info;
    void *lib = NULL;
    if (dladdr(dlsym(RTLD_DEFAULT, "PMPI_Comm_rank"), &info) && info.dli_fname)
        lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    void *f = lib ? dlsym(lib, name) : NULL;
    if (!f) {
        fprintf(stderr, "profiler: cannot find the MPI's own %s\n", name);
        abort();
    }
    return f;
}

int MPI_Init(int *argc, char ***argv) {
    ++inits;
    if (flag("PROFILER_INIT_DIRECT")) return ((int (*)(int *, char ***))in_mpi_library("PMPI_Init"))(argc, argv);
    return PMPI_Init(argc, argv);
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    ++inits;
    if (flag("PROFILER_INIT_DIRECT"))
        return ((int (*)(int *, char ***, int, int *))in_mpi_library("PMPI_Init_thread"))(argc, argv, required,
                                                                                        provided);
    return PMPI_Init_thread(argc, argv, required, provided);
}

int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
    ++allreduces;
    if (flag("PROFILER_SKIP_PMPI")) {
        int (*next)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm) =
            (int (*)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm))dlsym(RTLD_NEXT, "MPI_Allreduce");
        return next(s, r, n, t, op, c);
    }
    return PMPI_Allreduce(s, r, n, t, op, c);
}

int MPI_Reduce_scatter_block(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
    ++reduce_scatter_blocks;
    return PMPI_Reduce_scatter_block(s, r, n, t, op, c);
}

int MPI_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c) {
    ++allgathers;
    return PMPI_Allgather(s, sn, st, r, rn, rt, c);
}

int MPI_Finalize(void) {
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "profiler: rank %d: init=%ld allreduce=%ld reduce_scatter_block=%ld allgather=%ld\n", rank, inits,
            allreduces, reduce_scatter_blocks, allgathers);
    return PMPI_Finalize();
}
