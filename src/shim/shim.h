// Shared by the C and Fortran entry points.
#pragma once

namespace nexar {

// Starts the runtime after MPI is initialized; never throws, never fails the job.
void shim_start_runtime();
// Stops it before MPI is finalized; never throws.
void shim_stop_runtime();

}  // namespace nexar
