// What differs between the MPI families nexar builds against, in one place.
//
//   Open MPI (OPEN_MPI)  its Fortran bindings (libmpi_mpifh, mpi_f08) call
//                        PMPI_* and take their own sentinels: nexar
//                        interposes them (shim/fortran_shim.cc); CUDA
//                        awareness from MPIX_Query_cuda_support (mpi-ext.h).
//   MPICH (MPICH_VERSION) and its derivatives: its Fortran bindings turn
//                        their sentinels into C's and call the C MPI_X
//                        (and MPI_Allreduce_c), which nexar defines: nothing
//                        to interpose; CUDA awareness from
//                        MPIX_GPU_query_support.  MPI-4: MPI_Allreduce_c.
#pragma once

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#if defined(OPEN_MPI) && OPEN_MPI
#define NEXAR_MPI_FAMILY "Open MPI"
#define NEXAR_INTERPOSE_FORTRAN 1
#elif defined(MPICH_VERSION)
#define NEXAR_MPI_FAMILY "MPICH"
#define NEXAR_INTERPOSE_FORTRAN 0
#else
#define NEXAR_MPI_FAMILY "an MPI nexar was not tested with"
#define NEXAR_INTERPOSE_FORTRAN 0
#endif

// MPI-4's large-count bindings (MPI_Allreduce_c): nexar defines them where
// the MPI declares them.
#if MPI_VERSION >= 4
#define NEXAR_HAVE_LARGE_COUNT 1
#else
#define NEXAR_HAVE_LARGE_COUNT 0
#endif

namespace nexar {

// The MPI accepts CUDA device pointers itself (asked after MPI_Init).
inline bool mpi_cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    return MPIX_Query_cuda_support() == 1;
#elif defined(MPIX_GPU_SUPPORT_CUDA)
    int supported = 0;
    return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported) == MPI_SUCCESS && supported;
#else
    return false;
#endif
}

}  // namespace nexar
