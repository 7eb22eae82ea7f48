// Addresses that are host memory for sure, told without asking the GPU's
// driver: a driver's pointer query (cudaPointerGetAttributes) costs a
// fraction of a microsecond, as much as a small MPI call, and in a job on
// an MPI without CUDA support every call for the MPI must know where its
// buffers live (call/mpi_staging.h).  Small buffers are mostly on the
// caller's stack or in the program's heap, which no GPU allocation can be.
#pragma once

namespace nexar {

// True where `p` lies in the program's data, bss or brk heap (from the
// kernel's start_data up to the current break), or on the calling thread's
// stack.  False says nothing: ask the driver.
bool surely_host(const void* p);

}  // namespace nexar
