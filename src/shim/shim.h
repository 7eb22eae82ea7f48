// Shared by the C and Fortran entry points.
#pragma once

namespace nexar {

// Starts the runtime after MPI is initialized; never throws, never fails the job.
void shim_start_runtime();
// Stops it before MPI is finalized; never throws.
void shim_stop_runtime();

struct CollectiveCall;
// Dispatches an intercepted collective (core/collective.h); an internal
// error (only allocation failures throw) goes to the communicator's error
// handler, as any MPI error would, and never crosses into the caller.
int shim_intercept(const CollectiveCall& call);

}  // namespace nexar
