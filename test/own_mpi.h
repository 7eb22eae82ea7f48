/*
 * The MPI library's own PMPI_* functions, for test and benchmark programs
 * that compare nexar with the MPI underneath it.
 *
 * libnexar_pmpi defines PMPI_X itself for the calls it takes (so that a
 * profiler loaded before it, calling PMPI_X, still reaches the ring), and a
 * profiler may sit in front as well: a program that calls PMPI_X by name
 * may get nexar.  own_mpi(PMPI_X) looks PMPI_X up in the library that
 * defines PMPI_Comm_rank, which nexar does not define: the MPI's own.
 * Look each up once (dlsym is slow) and keep the pointer.
 */
#ifndef NEXAR_TEST_OWN_MPI_H
#define NEXAR_TEST_OWN_MPI_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* NULL where the MPI has no such function. */
static inline void *own_mpi_symbol_if_any(const char *name) {
    static void *lib = NULL;
    if (!lib) {
        Dl_info info;
        void *anchor = dlsym(RTLD_DEFAULT, "PMPI_Comm_rank");
        if (anchor && dladdr(anchor, &info) && info.dli_fname) lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    }
    return lib ? dlsym(lib, name) : NULL;
}

static inline void *own_mpi_symbol(const char *name) {
    void *f = own_mpi_symbol_if_any(name);
    if (!f) {
        fprintf(stderr, "cannot find the MPI library's own %s\n", name);
        abort();
    }
    return f;
}

/* own_mpi(PMPI_Allreduce)(...): the MPI's PMPI_Allreduce, typed. */
#define own_mpi(name) ((__typeof__(&name))own_mpi_symbol(#name))

#endif
