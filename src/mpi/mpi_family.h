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

#include <cstdlib>
#include <string>
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

// Which MPI a library was built for, or runs on: its family ("Open MPI",
// "MPICH") and version ("4.1.4"; major 4).  Empty family: not known.
struct MpiIdentity {
    std::string family;
    std::string version;
    int major = -1;
};

// The MPI this library was compiled against (mpi.h's version macros).
MpiIdentity mpi_built_for();
// The MPI named by MPI_Get_library_version's text ("Open MPI v5.0.10, ...",
// "MPICH Version: 4.0.2 ..."); an empty family where the text is another's.
MpiIdentity parse_mpi_library_version(const char* text);
// The MPI the job runs on (PMPI_Get_library_version, parsed); an empty
// family where MPI cannot say or is another's.
MpiIdentity mpi_running();
// Why a library built for `built` should not run on `running`, or "" when it
// may: another family, or another major version of it.  Open MPI 4.x and
// 5.x both name their library libmpi.so.40, so a library built for one
// loads against the other without a word from the dynamic linker.
std::string mpi_mismatch(const MpiIdentity& built, const MpiIdentity& running);

// The MPI accepts CUDA device pointers itself (asked after MPI_Init).
// For the test suite, NEXAR_EMULATED_GPU_CUDA_AWARE_MPI=1 says so where
// the host-emulated GPU stands in for one (NEXAR_EMULATED_GPU_PLUGIN set):
// its "device" memory is host memory, which any MPI moves.
inline bool mpi_cuda_aware() {
    const char* stand_in = getenv("NEXAR_EMULATED_GPU_CUDA_AWARE_MPI");
    if (stand_in && stand_in[0] == '1' && !stand_in[1] && getenv("NEXAR_EMULATED_GPU_PLUGIN")) return true;
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
