// The persistent collectives' initialization under one name for the tests:
// MPI-4's MPI_X_init (MPICH 4, Open MPI 5), or Open MPI 4's MPIX_X_init
// (mpi-ext.h).  NB_ALLREDUCE_INIT is undefined where the MPI has neither.
#pragma once

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define NB_ALLREDUCE_INIT MPI_Allreduce_init
#define NB_REDUCE_SCATTER_BLOCK_INIT MPI_Reduce_scatter_block_init
#define NB_ALLGATHER_INIT MPI_Allgather_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define NB_ALLREDUCE_INIT MPIX_Allreduce_init
#define NB_REDUCE_SCATTER_BLOCK_INIT MPIX_Reduce_scatter_block_init
#define NB_ALLGATHER_INIT MPIX_Allgather_init
#endif
