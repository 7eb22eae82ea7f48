/*
 * nexar.h - public API of libnexar_pmpi.
 *
 * The library needs no calls from the application: loaded with LD_PRELOAD or
 * linked with -lnexar_pmpi ahead of -lmpi it intercepts MPI_Allreduce.  This
 * header only lets a program that wants to know ask what the library did.
 */
#ifndef NEXAR_NEXAR_H
#define NEXAR_NEXAR_H

#include <stdint.h>

/* NEXAR_VERSION ("MAJOR.MINOR.PATCH") and NEXAR_VERSION_MAJOR, _MINOR and
 * _PATCH, made by configure from configure.ac's version. */
#include <nexar/nexar_version.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Counters of this process: the first four numbers NEXAR_STATS=1 prints at
 * MPI_Finalize (the line's later fields are not in this struct: nexar_get_counter reads
 * every field by name). */
typedef struct nexar_stats {
    uint64_t ring_calls;        /* allreduces done by the nexar ring */
    uint64_t ring_bytes;        /* their payload: count * datatype size, summed */
    uint64_t passthrough_calls; /* allreduces handed to PMPI_Allreduce as not eligible */
    uint64_t fallback_calls;    /* eligible allreduces that went to PMPI_Allreduce anyway
                                   (UCX down on some rank, scratch unavailable, ...) */
} nexar_stats_t;

/* Fills *out; returns 0, or -1 when out is NULL. */
int nexar_get_stats(nexar_stats_t *out);
/* Any counter of the NEXAR_STATS line by its field name ("shm_bytes",
 * "reduce_scatter_calls", ...; the Counters table of docs/user-guide.md
 * lists them, and nexar-info -p's stats_fields):
 * sets *value and returns 0, or returns -1 for a name the line does not
 * have (or a NULL argument).  Counters of this process, readable at any
 * time, also after MPI_Finalize. */
int nexar_get_counter(const char *name, uint64_t *value);
#define NEXAR_HAVE_GET_COUNTER 1 /* nexar_get_counter exists (library interface 1) */

/* "MAJOR.MINOR.PATCH" */
const char *nexar_version(void);

/* 1 when nexar runs collectives in this process (started, NEXAR_ENABLE=1),
 * else 0.  Shared memory needs no UCX; whether UCX runs for the hops
 * across nodes, nexar-info and NEXAR_LOG=info say. */
int nexar_transport_ready(void);

#if defined(MPI_VERSION)
/* 16-bit floating-point datatypes for MPI_Allreduce (SUM, PROD, MIN, MAX).
 * Include <mpi.h> before this header to get them.  Valid between MPI_Init
 * and MPI_Finalize (MPI_DATATYPE_NULL otherwise).  Values are reduced in
 * float and rounded to nearest even, on the GPU and on the host alike; calls
 * that nexar passes through to MPI carry nexar's own MPI_Op for them.  An MPI
 * that defines MPIX_C_FLOAT16 / MPIX_BFLOAT16 can use those instead. */
MPI_Datatype nexar_type_float16(void);  /* IEEE 754 binary16 */
MPI_Datatype nexar_type_bfloat16(void); /* bfloat16 */
#endif

#ifdef __cplusplus
}
#endif

#endif /* NEXAR_NEXAR_H */
